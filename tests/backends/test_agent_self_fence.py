"""The agent's own view of its lease (`process/lease.py`): it may act until two thirds of the
lease after it sent its last answered call, never on the strength of an answer to a call sent
before it was told it leads no more."""

from __future__ import annotations

import pytest

from scheduler.backends.agent.process import lease as lease_module
from scheduler.backends.agent.process.cluster import Applier, Fenced


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(lease_module.time, "monotonic", clock)
    return clock


def test_it_acts_until_the_renew_deadline_after_the_last_answered_call(clock):
    lease = lease_module.Lease()
    assert not lease.held()  # nothing answered yet
    lease.configure(15)
    lease.renewed(sent_at=clock.now)
    clock.now += 9.9
    assert lease.held()
    clock.now += 0.2  # 10.1 s after the call was sent: it may have been the last renewal
    assert not lease.held()
    lease.renewed(sent_at=clock.now - 1)  # a long poll sent a second ago, answered now
    assert lease.held()


def test_a_late_answer_to_a_call_sent_before_it_lost_the_lease_renews_nothing(clock):
    lease = lease_module.Lease()
    lease.configure(15)
    sent = clock.now
    lease.renewed(sent_at=sent)
    clock.now += 1
    lease.lost()  # 409 agent_not_leader
    assert not lease.held()
    lease.renewed(sent_at=sent + 0.5)  # sent before it was told
    assert not lease.held()
    lease.renewed(sent_at=clock.now + 0.1)  # a register that won it again
    assert lease.held()


def test_the_applier_writes_nothing_once_it_may_not_act():
    applier = Applier(kube=None, namespace="east", may_act=lambda: False)
    item = {"id": 1, "kind": "create", "payload": {"objects": [
        {"kind": "Pod", "metadata": {"name": "p"}}]}}
    with pytest.raises(Fenced):
        applier.apply(item)  # before any call: its kube is not even there
    with pytest.raises(Fenced):
        applier.apply({"id": 2, "kind": "sync", "payload": {"objects": []}})
