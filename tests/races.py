"""Races on real connections: callables started at one moment, each on its own thread and
its own database connection (Django opens one per thread), as concurrent requests would be."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection


def together(targets: Sequence[Callable[[], Any]], *, timeout: float | None = None) -> list:
    """Run ``targets`` at once, released by one barrier; their results in order, the
    exception in place of the result of one that raised."""
    barrier = threading.Barrier(len(targets))
    results: list = [None] * len(targets)

    def run(index: int, target: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = target()
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return results


def errors_of(results: list) -> list[BaseException]:
    return [r for r in results if isinstance(r, BaseException)]


def all_together(targets: Sequence[Callable[[], Any]]) -> list:
    """:func:`together`, failing the test if any target raised."""
    results = together(targets)
    assert not errors_of(results), errors_of(results)
    return results
