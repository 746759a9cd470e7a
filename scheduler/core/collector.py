"""Pausing Python's cyclic garbage collector around work that makes many short-lived objects.

A cycle (and building its snapshot) allocates hundreds of thousands of objects that reference
counting frees; left on, the cyclic collector would walk the whole heap - the snapshot, and
the informer cache or query results it is built from - again and again while they come and go
(a third of a 140,000-pod cycle; most of building a 350,000-pod snapshot). It resumes as it was
afterwards, also when the work raises.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
