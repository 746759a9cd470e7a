"""Work measured without a clock, so that a bound on it proves bounded work and cannot flake
on a loaded machine: lines of Python executed (deterministic), and for work done inside C
(big integers, long strings) the CPU time of the calling thread (other processes' load does not
count in it)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def lines_run(call: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, int]:
    """``call(*args, **kwargs)``'s result and how many lines of Python (the product's and its
    libraries') it executed."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        result = call(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return result, count


def cpu_run(call: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """``call(*args, **kwargs)``'s result and the CPU seconds this thread spent in it."""
    started = time.thread_time()
    result = call(*args, **kwargs)
    return result, time.thread_time() - started
