"""What a backend agent's cycles add to the scheduler's metrics (:mod:`scheduler.metrics`)
between two of its sends: the ``tally`` of a ``cycle`` message. Pure values, importable without
the database — the agent builds one per cycle and merges the one a newer cycle replaces; the
service checks its bounds and records it once the message is applied.

``{"cycles": n, "phases": [[snapshot, decide, apply], ...], "bound": n,
"evicted": {reason: n}, "moved": n, "first_bound": [workflow, ...]}``: phase times in
seconds, of the latest ``MAX_TALLY_PHASES`` cycles (``cycles`` counts them all, so
``osmo_scheduler_cycles_total`` stays exact when the histograms keep a sample); ``first_bound``:
the workflows whose first pod a cycle bound, at most ``MAX_TALLY_FIRST_BOUND``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from functools import reduce
from typing import Any

MAX_TALLY_PHASES = 200
MAX_TALLY_FIRST_BOUND = 1000
# The serializer's other bounds. Eviction reasons are a handful (preempted, reclaimed, stale,
# incomplete) and become label values: words of a few letters only.
MAX_TALLY_REASONS = 16
REASON_PATTERN = r"[a-z][a-z_]{0,31}"
MAX_PHASE_SECONDS = 86_400.0


def cycle_tally(figures: Any, first_bound: Iterable[str] = ()) -> dict[str, Any]:
    """One cycle's tally from its figures (``CycleFigures``), as the in-process backend
    records its own: the pods it left incomplete count as evicted, the moves as consolidated."""
    return {"cycles": 1,
            "phases": [[figures.snapshot_ms / 1000, figures.decide_ms / 1000,
                        figures.apply_ms / 1000]],
            "bound": figures.bound,
            "evicted": dict(Counter(figures.eviction_reasons + ["incomplete"] * figures.undone)),
            "moved": figures.moved,
            "first_bound": list(dict.fromkeys(first_bound))[:MAX_TALLY_FIRST_BOUND]}


def merge_tallies(older: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """Both tallies as one: counts summed, the bounded lists keeping their latest entries."""
    evicted = Counter(older["evicted"])
    evicted.update(newer["evicted"])
    first_bound = list(dict.fromkeys([*older["first_bound"], *newer["first_bound"]]))
    return {"cycles": older["cycles"] + newer["cycles"],
            "phases": [*older["phases"], *newer["phases"]][-MAX_TALLY_PHASES:],
            "bound": older["bound"] + newer["bound"],
            "evicted": dict(evicted),
            "moved": older["moved"] + newer["moved"],
            "first_bound": first_bound[-MAX_TALLY_FIRST_BOUND:]}


def carry_tally(replaced: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """The ``cycle`` payload that replaces an unsent one: its own state, both tallies."""
    tallies = [message["tally"] for message in (replaced, payload) if "tally" in message]
    if not tallies:
        return payload
    return {**payload, "tally": reduce(merge_tallies, tallies)}
