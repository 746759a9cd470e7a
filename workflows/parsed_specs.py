"""The specs this process has parsed for submissions, kept by what the parse depends on: the
text, the ``--set`` variables, the pool's platforms and the input limits. A spec submitted again
(a sweep's jobs, a retry, a pipeline submitting one file) is not bounded, loaded and validated
again — 0.3 of a submission's 1.7–2.1 ms of CPU in one process.

A parse that read the cluster's Topology (a spec naming topology levels) depends on the stored
Topology as well, and is not kept. A refused spec is not kept either: it is refused again. The
parsed spec is made of frozen dataclasses, so every submission can share it. At most 256 specs
of at most 1 MiB of text in all (:class:`osmo.text_keyed.TextKeyed`: about 26 MB).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from osmo.bounded import InputLimits
from osmo.text_keyed import TextKeyed

from .spec import WorkflowSpec

PARSED = TextKeyed(entries=256, characters=1024 * 1024, longest=64 * 1024)


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

    def __len__(self) -> int:  # also its truth value
        self.read = True
        return len(self.inner)


def key_of(source: object, *, set_variables: Sequence[str], set_string_variables: Sequence[str],
           platforms: Sequence[str], default_platform: str | None,
           limits: InputLimits) -> tuple | None:
    """What a parse of ``source`` depends on besides the Topology; None for a source that is not
    kept (not a text, or a long one)."""
    if not PARSED.keeps(source):
        return None
    return (source, tuple(set_variables), tuple(set_string_variables), frozenset(platforms),
            default_platform, limits)


def get(key: tuple | None) -> WorkflowSpec | None:
    return None if key is None else PARSED.get(key)


def keep(key: tuple | None, spec: WorkflowSpec, topologies: Watched) -> None:
    if key is not None and not topologies.read:
        PARSED.put(key, spec)
