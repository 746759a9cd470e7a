"""When the periodic resync asks a LIST + WATCH for a fresh LIST."""

from __future__ import annotations

import time

from scheduler.backends.kubernetes.listwatch import ListWatch


def test_a_relist_is_asked_for_unless_one_was_made_within_the_window() -> None:
    watch = ListWatch()
    watch.request_relist(unless_listed_within=30)
    assert watch.relist_requested  # never listed: the first LIST is due anyway

    watch.relist_requested = False
    watch.listed_at = time.monotonic()  # the start's first LIST, just made
    watch.request_relist(unless_listed_within=30)
    assert not watch.relist_requested

    watch.listed_at = time.monotonic() - 31
    watch.request_relist(unless_listed_within=30)
    assert watch.relist_requested
