"""Reads that answer the same for every group of one dispatch batch (the cluster Topology, a
submitter's REGISTRY credentials): inside :func:`one_batch` each is read once and shared by
the batch's groups; outside one, every call reads. A batch is prepared in a fraction of a
second: a change made meanwhile reaches the next batch, as it would a group prepared a moment
later."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

_reads: ContextVar[dict | None] = ContextVar("batch_reads", default=None)


@contextmanager
def one_batch() -> Iterator[None]:
    token = _reads.set({})
    try:
        yield
    finally:
        _reads.reset(token)


def once(key: Hashable, read: Callable[[], T]) -> T:
    """``read()``, or the answer it gave for ``key`` earlier in this batch."""
    reads = _reads.get()
    if reads is None:
        return read()
    if key not in reads:
        reads[key] = read()
    return reads[key]
