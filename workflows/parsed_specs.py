"""The specs this process has parsed for submissions, kept by what the parse depends on: the
text, the ``--set`` variables, the pool's platforms and the input limits. A spec submitted again
(a sweep's jobs, a retry, a pipeline submitting one file) is not bounded, loaded and validated
again — 0.3 of a submission's 1.6 ms of CPU in the web process.

A parse that read the cluster's Topology (a spec naming topology levels) depends on the stored
Topology as well, and is not kept. A refused spec is not kept either: it is refused again. The
parsed spec is made of frozen dataclasses, so every submission can share it. What is kept is
bounded by count and by the characters of its texts: a parsed spec holds about 26 times its
text (a 46 KB spec of 600 tasks: 1.2 MB), so at most about 26 MB a process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from osmo.bounded import InputLimits

from .spec import WorkflowSpec

MAX_SPECS = 256
MAX_CHARACTERS = 64 * 1024  # a larger text is parsed each time rather than kept
MAX_KEPT_CHARACTERS = 1024 * 1024  # of all the kept texts

_lock = threading.Lock()
_kept: OrderedDict[tuple, WorkflowSpec] = OrderedDict()
_characters = [0]  # of the kept texts


class Watched(Mapping):
    """A mapping that notes whether the parse read it."""

    def __init__(self, inner: Mapping[str, Any]) -> None:
        self.inner = inner
        self.read = False

    def __getitem__(self, key: str) -> Any:
        self.read = True
        return self.inner[key]

    def __iter__(self) -> Iterator[str]:
        self.read = True
        return iter(self.inner)

    def __len__(self) -> int:
        self.read = True
        return len(self.inner)

    def __bool__(self) -> bool:
        self.read = True
        return bool(self.inner)


def key_of(source: object, *, set_variables: Sequence[str], set_string_variables: Sequence[str],
           platforms: Sequence[str], default_platform: str | None,
           limits: InputLimits) -> tuple | None:
    """What a parse of ``source`` depends on besides the Topology; None for a source that is not
    kept (not a text, or a long one)."""
    if not isinstance(source, str) or len(source) > MAX_CHARACTERS:
        return None
    return (source, tuple(set_variables), tuple(set_string_variables), frozenset(platforms),
            default_platform, limits)


def get(key: tuple | None) -> WorkflowSpec | None:
    if key is None:
        return None
    with _lock:
        spec = _kept.get(key)
        if spec is not None:
            _kept.move_to_end(key)
        return spec


def keep(key: tuple | None, spec: WorkflowSpec, topologies: Watched) -> None:
    if key is None or topologies.read:
        return
    with _lock:
        if key not in _kept:
            _characters[0] += len(key[0])
        _kept[key] = spec
        _kept.move_to_end(key)
        while len(_kept) > MAX_SPECS or _characters[0] > MAX_KEPT_CHARACTERS:
            oldest, _spec = _kept.popitem(last=False)
            _characters[0] -= len(oldest[0])


def forget() -> None:
    with _lock:
        _kept.clear()
        _characters[0] = 0
