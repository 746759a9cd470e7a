"""Messages waiting for the service's ack, in the order they were made.

Ids are this process's random prefix and a counter: unique across the agent's restarts
without anything kept on disk (the service de-duplicates by id)."""

from __future__ import annotations

import secrets
import threading
from itertools import count

import orjson

MAX_BATCH_MESSAGES = 200
MAX_BATCH_BYTES = 1024 * 1024  # the service takes 4 MiB a request; a pods message is ~400 KiB


class Outbox:
    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._numbers = count(1)
        self._messages: list[tuple[dict, int]] = []  # (message, encoded size)
        self._lock = threading.Lock()
        self.ready = threading.Event()

    def put(self, kind: str, payload: dict) -> str:
        message = {"id": f"{self._prefix}-{next(self._numbers)}", "type": kind,
                   "payload": payload}
        with self._lock:
            self._messages.append((message, len(orjson.dumps(message))))
            self.ready.set()
        return message["id"]

    def put_latest(self, kind: str, payload: dict) -> str:
        """A message that replaces the unacked ones of its kind (a state, not an event: only
        the latest matters)."""
        with self._lock:
            self._messages = [(m, n) for m, n in self._messages if m["type"] != kind]
        return self.put(kind, payload)

    def batch(self) -> list[dict]:
        """The oldest unacked messages, up to a batch's count and bytes (one at least)."""
        out, size = [], 0
        with self._lock:
            for message, length in self._messages[:MAX_BATCH_MESSAGES]:
                if out and size + length > MAX_BATCH_BYTES:
                    break
                out.append(message)
                size += length
            if not out:
                self.ready.clear()
        return out

    def acked(self, ids: list[str]) -> None:
        done = set(ids)
        with self._lock:
            self._messages = [(m, n) for m, n in self._messages if m["id"] not in done]
            if not self._messages:
                self.ready.clear()

    def clear(self) -> None:
        """Drop every unacked message: another agent leads and reports this cluster (this one
        re-lists everything when it leads again)."""
        with self._lock:
            self._messages = []
            self.ready.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._messages)
