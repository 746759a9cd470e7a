"""The agent's tally of its cycles' metrics (``scheduler/cycle_tally.py``) and the outbox that
keeps it while the service has not acked it: a replaced cycle's tally is merged into the one
replacing it, bounded; one the service may have applied is never merged (it would count
twice)."""

from __future__ import annotations

from scheduler.backends.agent.process.outbox import Outbox
from scheduler.backends.kubernetes.calls import CycleFigures
from scheduler.cycle_tally import (
    MAX_TALLY_FIRST_BOUND,
    MAX_TALLY_PHASES,
    carry_tally,
    cycle_tally,
    merge_tallies,
)


def tally(cycles=1, phases=None, bound=0, evicted=None, moved=0, first_bound=()) -> dict:
    return {"cycles": cycles, "phases": phases if phases is not None else [[0.1, 0.2, 0.3]],
            "bound": bound, "evicted": evicted or {}, "moved": moved,
            "first_bound": list(first_bound)}


def test_a_cycles_tally_is_what_the_in_process_backend_records():
    figures = CycleFigures(snapshot_ms=12.0, decide_ms=3.0, apply_ms=250.0, bound=5, moved=2,
                           undone=1, eviction_reasons=["preempted", "preempted", "stale"])
    assert cycle_tally(figures, ["w-1", "w-2", "w-1"]) == {
        "cycles": 1, "phases": [[0.012, 0.003, 0.25]], "bound": 5,
        "evicted": {"preempted": 2, "stale": 1, "incomplete": 1}, "moved": 2,
        "first_bound": ["w-1", "w-2"]}


def test_merged_tallies_sum_their_counts_and_keep_both_lists():
    older = tally(cycles=2, phases=[[1, 2, 3], [4, 5, 6]], bound=3,
                  evicted={"preempted": 1}, moved=1, first_bound=["a", "b"])
    newer = tally(cycles=1, phases=[[7, 8, 9]], bound=2,
                  evicted={"preempted": 2, "stale": 1}, moved=0, first_bound=["b", "c"])
    assert merge_tallies(older, newer) == {
        "cycles": 3, "phases": [[1, 2, 3], [4, 5, 6], [7, 8, 9]], "bound": 5,
        "evicted": {"preempted": 3, "stale": 1}, "moved": 1, "first_bound": ["a", "b", "c"]}


def test_merged_lists_stay_bounded_keeping_the_latest_while_counts_stay_exact():
    older = tally(cycles=150, phases=[[i, 0, 0] for i in range(150)],
                  first_bound=[f"old-{i}" for i in range(900)])
    newer = tally(cycles=100, phases=[[1000 + i, 0, 0] for i in range(100)],
                  first_bound=[f"new-{i}" for i in range(200)])
    merged = merge_tallies(older, newer)
    assert merged["cycles"] == 250
    assert len(merged["phases"]) == MAX_TALLY_PHASES
    assert merged["phases"][0] == [50, 0, 0] and merged["phases"][-1] == [1099, 0, 0]
    assert len(merged["first_bound"]) == MAX_TALLY_FIRST_BOUND
    assert merged["first_bound"][0] == "old-100" and merged["first_bound"][-1] == "new-199"


def test_a_replacing_payload_carries_the_replaced_tally_and_its_own_state():
    replaced = {"bound": 1, "queues": ["old"], "tally": tally(bound=1)}
    payload = {"bound": 2, "queues": ["new"], "tally": tally(bound=2)}
    assert carry_tally(replaced, payload) == {
        "bound": 2, "queues": ["new"], "tally": {**tally(cycles=2, bound=3),
                                                  "phases": [[0.1, 0.2, 0.3]] * 2}}
    assert carry_tally({"bound": 1}, payload) == payload  # an older agent's: none to carry


def cycle(outbox: Outbox, bound: int) -> str:
    return outbox.put_latest("cycle", {"bound": bound, "tally": tally(bound=bound)},
                             merge=carry_tally)


def sent(outbox: Outbox) -> list[tuple[str, int, int]]:
    """A batch as (type, the state's bound, the tally's bound)."""
    return [(m["type"], m["payload"].get("bound", 0), m["payload"].get("tally", {}).get(
        "bound", 0)) for m in outbox.batch()]


def test_a_cycle_not_sent_yet_is_replaced_in_its_place_with_both_tallies():
    outbox = Outbox()
    cycle(outbox, 1)
    outbox.put("pods", {})
    cycle(outbox, 2)
    outbox.put("pods", {})
    cycle(outbox, 4)
    assert len(outbox) == 3
    assert sent(outbox) == [("cycle", 4, 7), ("pods", 0, 0), ("pods", 0, 0)]


def test_a_cycle_whose_batch_got_no_answer_is_kept_and_sent_alone_until_acked():
    outbox = Outbox()
    first = cycle(outbox, 1)
    assert sent(outbox) == [("cycle", 1, 1)]  # ... and the service is unreachable
    cycle(outbox, 2)
    cycle(outbox, 4)
    outbox.put("heartbeat", {})
    # The first may have been applied: sent again as it was, the newer one waits for its ack.
    assert sent(outbox) == [("cycle", 1, 1)]
    cycle(outbox, 8)
    assert len(outbox) == 3
    outbox.acked([first])
    assert sent(outbox) == [("cycle", 8, 14), ("heartbeat", 0, 0)]


def test_a_cycle_the_service_answered_without_acking_is_merged_into_the_next():
    outbox = Outbox()
    cycle(outbox, 1)
    heartbeat = outbox.put("heartbeat", {})
    assert sent(outbox) == [("cycle", 1, 1), ("heartbeat", 0, 0)]
    outbox.acked([])  # the service stopped at it: its transaction rolled back
    cycle(outbox, 2)
    assert sent(outbox) == [("cycle", 2, 3), ("heartbeat", 0, 0)]
    outbox.acked([next(m["id"] for m in outbox.batch() if m["type"] == "cycle"), heartbeat])
    assert len(outbox) == 0
