"""What a process made from a text (a parsed spec), kept for the next time the same text comes:
the least recently used go first, and what is kept is bounded by count and by the characters of
its texts — a parsed spec holds about 26 times its text (a 46 KB spec of 600 tasks: 1.2 MB), so
a bound on count alone would let large texts fill the memory. A key is a tuple whose first item
is the text; a text longer than ``longest`` is never kept, nor hashed to be looked up. Safe to
share between threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class TextKeyed:
    def __init__(self, *, entries: int, characters: int, longest: int) -> None:
        self.entries, self.characters, self.longest = entries, characters, longest
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple, Any] = OrderedDict()
        self._held = 0  # characters of the kept texts

    def keeps(self, text: object) -> bool:
        return isinstance(text, str) and len(text) <= self.longest

    def get(self, key: tuple) -> Any | None:
        if not self.keeps(key[0]):
            return None
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def put(self, key: tuple, value: Any) -> None:
        if not self.keeps(key[0]):
            return
        with self._lock:
            if key not in self._kept:
                self._held += len(key[0])
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.entries or self._held > self.characters:
                oldest, _value = self._kept.popitem(last=False)
                self._held -= len(oldest[0])

    def texts(self) -> list[str]:
        """The kept texts, the least recently used first."""
        with self._lock:
            return [key[0] for key in self._kept]

    def held(self) -> int:
        with self._lock:
            return self._held

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._held = 0
