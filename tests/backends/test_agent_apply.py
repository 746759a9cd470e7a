"""The agent's worker applies a poll's consecutive creates together, each PodGroup's items in
id order, and any other item alone after those before it; at an item not done it stops, so
what follows comes again, in order."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from scheduler.backends.agent.process.cluster import Transient
from scheduler.backends.agent.process.main import Agent


class FakeApplier:
    def __init__(self, *, barrier: threading.Barrier | None = None, failing: int = 0):
        self.barrier = barrier
        self.failing = failing
        self.applied: list[int] = []
        self.lock = threading.Lock()

    def apply(self, item: dict) -> str:
        if item["id"] == self.failing:
            raise Transient("the cluster is away")
        if self.barrier is not None and item["payload"].get("first"):
            self.barrier.wait()  # only two threads at once pass it
        with self.lock:
            self.applied.append(item["id"])
        return ""


def _agent() -> Agent:
    agent = Agent.__new__(Agent)
    agent.name = "east"
    agent.stop = threading.Event()
    agent.applied_through = 0
    agent._appliers = ThreadPoolExecutor(4)
    return agent


def _create(id_: int, podgroup: str, **payload) -> dict:
    return {"id": id_, "kind": "create", "payload": {"podgroup": podgroup, **payload}}


def test_creates_of_two_podgroups_are_applied_at_once():
    applier = FakeApplier(barrier=threading.Barrier(2, timeout=5))
    acks, wait = _agent().apply_items(applier, [_create(1, "a", first=True),
                                                _create(2, "b", first=True)])
    assert sorted(ack["id"] for ack in acks) == [1, 2] and wait == 0


def test_a_podgroups_items_keep_their_order_and_other_work_waits_for_the_creates_before():
    agent, applier = _agent(), FakeApplier()
    items = [_create(1, "a"), _create(2, "b"), _create(3, "a"), _create(4, "b"),
             {"id": 5, "kind": "delete", "payload": {"podgroup": "a"}},
             _create(6, "c"), _create(7, "a")]
    acks, wait = agent.apply_items(applier, items)
    order = applier.applied
    assert order.index(1) < order.index(3) and order.index(2) < order.index(4)
    assert set(order[:4]) == {1, 2, 3, 4} and order[4] == 5 and set(order[5:]) == {6, 7}
    assert sorted(ack["id"] for ack in acks) == [1, 2, 3, 4, 5, 6, 7] and wait == 0
    assert agent.applied_through == 7


def test_at_an_item_not_done_its_podgroup_and_the_work_after_wait():
    agent, applier = _agent(), FakeApplier(failing=2)
    items = [_create(1, "a"), _create(2, "b"), _create(3, "a"), _create(4, "b"),
             {"id": 5, "kind": "sync", "payload": {}}, _create(6, "c")]
    acks, wait = agent.apply_items(applier, items)
    assert sorted(ack["id"] for ack in acks) == [1, 3]  # b's 4 waits for its 2; 5, 6 too
    assert sorted(applier.applied) == [1, 3]
    assert agent.applied_through == 1  # the highest applied in id order
    assert wait > 0
