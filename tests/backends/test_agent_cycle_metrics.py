"""The agent's cycles feed the scheduler's metrics (docs/OBSERVABILITY.md) as the in-process
backend's do: a ``cycle`` message's ``tally`` is recorded once its transaction commits, once
per message id; a workflow's first bind counts while none of its tasks has started and its
group is this backend's; a tally out of bounds is a 400 that records nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from scheduler.models import AgentMessage, SchedulerCycle
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, submit
from workflows.models import Workflow

from .test_agent_api import agent, cycle, east, register  # noqa: F401 - the fixtures

pytestmark = pytest.mark.django_db

SERIES = [
    ("osmo_scheduler_cycles_total", {"result": "success"}),
    ("osmo_scheduler_pods_bound_total", {}),
    ("osmo_scheduler_pods_evicted_total", {"reason": "preempted"}),
    ("osmo_scheduler_pods_evicted_total", {"reason": "incomplete"}),
    ("osmo_scheduler_pods_moved_total", {"reason": "consolidated"}),
    ("osmo_scheduler_cycle_duration_seconds_count", {"phase": "snapshot"}),
    ("osmo_scheduler_cycle_duration_seconds_sum", {"phase": "apply"}),
    ("osmo_scheduler_e2e_scheduling_duration_seconds_count", {}),
    ("osmo_scheduler_time_to_first_bind_seconds_count", {"priority": "HIGH"}),
    ("osmo_scheduler_time_to_first_bind_seconds_bucket", {"priority": "HIGH", "le": "30.0"}),
    ("osmo_scheduler_time_to_first_bind_seconds_bucket", {"priority": "HIGH", "le": "60.0"}),
    ("osmo_scheduler_time_to_first_bind_seconds_count", {"priority": "NORMAL"}),
]


def samples() -> list[float]:
    return [REGISTRY.get_sample_value(name, labels) or 0.0 for name, labels in SERIES]


def changes(before: list[float]) -> dict[tuple[str, str], float]:
    """The series that changed, and by how much (rounded: float sums)."""
    return {(name, ",".join(f"{k}={v}" for k, v in labels.items())): round(after - was, 6)
            for (name, labels), was, after in zip(SERIES, before, samples(), strict=True)
            if after != was}


def tally(**changes) -> dict:
    return {"cycles": 3, "phases": [[0.01, 0.002, 0.5], [0.02, 0.003, 0.25]], "bound": 7,
            "evicted": {"preempted": 2, "incomplete": 1}, "moved": 1, "first_bound": [],
            **changes}


def send(client, message_id: str, payload: dict):
    return client.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": message_id, "type": "cycle", "payload": payload}]}, format="json")


@pytest.fixture
def claimed(agent, settings):  # noqa: F811 - the fixture
    """Two workflows whose groups the east agent was given (one HIGH submitted 40 s ago, one
    started already) and one of a pool east does not serve."""
    settings.OSMO_METRICS = True
    factories.pool("team", 64, backends=["east"])
    factories.pool("other", 64)
    alice = make_client("alice", "osmo-team-user")
    fresh = submit(alice, "team", spec("fresh", gpus=1), priority="HIGH")
    started = submit(alice, "team", spec("started", gpus=1))
    elsewhere = submit(make_client("bob", "osmo-other-user"), "other", spec("else", gpus=1))
    register(agent)
    assert len(agent.post("/api/configs/backend/east/agent/work", {"wait": 0},
                          format="json").json()["work"]) >= 2  # their creates
    Workflow.objects.filter(name=fresh).update(submitted_at=timezone.now() - timedelta(
        seconds=40))
    Workflow.objects.filter(name=started).update(started_at=timezone.now())
    return fresh, started, elsewhere


def test_a_cycles_tally_is_recorded_once_as_the_in_process_backend_records_its_cycles(
        agent, claimed, django_capture_on_commit_callbacks):  # noqa: F811 - the fixture
    fresh, started, elsewhere = claimed
    before = samples()
    payload = cycle(tally=tally(first_bound=[fresh, started, elsewhere, "unknown"]))
    with django_capture_on_commit_callbacks(execute=True):
        assert send(agent, "c1", payload).json() == {"acked": ["c1"]}
    assert changes(before) == {
        ("osmo_scheduler_cycles_total", "result=success"): 3,
        ("osmo_scheduler_pods_bound_total", ""): 7,
        ("osmo_scheduler_pods_evicted_total", "reason=preempted"): 2,
        ("osmo_scheduler_pods_evicted_total", "reason=incomplete"): 1,
        ("osmo_scheduler_pods_moved_total", "reason=consolidated"): 1,
        ("osmo_scheduler_cycle_duration_seconds_count", "phase=snapshot"): 2,
        ("osmo_scheduler_cycle_duration_seconds_sum", "phase=apply"): 0.75,
        ("osmo_scheduler_e2e_scheduling_duration_seconds_count", ""): 2,
        ("osmo_scheduler_time_to_first_bind_seconds_count", "priority=HIGH"): 1,
        ("osmo_scheduler_time_to_first_bind_seconds_bucket", "priority=HIGH,le=60.0"): 1}
    assert SchedulerCycle.objects.get(backend="east").bound == 3  # the record as before

    # Sent again (its ack lost): applied before, so nothing is recorded twice.
    after_first = samples()
    with django_capture_on_commit_callbacks(execute=True):
        assert send(agent, "c1", payload).json() == {"acked": ["c1"]}
    assert changes(after_first) == {}

    # An older agent's cycle has no tally: its record is written, no metric moves.
    with django_capture_on_commit_callbacks(execute=True):
        assert send(agent, "c2", cycle(bound=5)).json() == {"acked": ["c2"]}
    assert changes(after_first) == {}
    assert SchedulerCycle.objects.get(backend="east").bound == 5


def test_nothing_is_recorded_before_the_transaction_commits(agent, claimed):  # noqa: F811
    before = samples()
    # This test's transaction never commits: the message's callbacks never run.
    assert send(agent, "c1", cycle(tally=tally())).json() == {"acked": ["c1"]}
    assert changes(before) == {}


@pytest.mark.parametrize("change, field", [
    ({"cycles": -1}, "cycles"),
    ({"cycles": 0, "phases": []}, "cycles"),
    ({"bound": -2}, "bound"),
    ({"moved": -1}, "moved"),
    ({"phases": [[0.1, 0.1, 0.1]] * 201, "cycles": 500}, "phases"),
    ({"phases": [[0.1, 0.1]]}, "phases"),
    ({"phases": [[0.1, -0.1, 0.1]]}, "phases"),
    ({"phases": [["nan", 0.1, 0.1]]}, "phases"),
    ({"phases": [[0.1, 0.1, 0.1]] * 4}, "phases"),  # more than its 3 cycles
    ({"evicted": {"preempted": -1}}, "evicted"),
    ({"evicted": {"Not A Label": 1}}, "evicted"),
    ({"evicted": {f"r{i}": 1 for i in range(17)}}, "evicted"),
    ({"first_bound": ["w"] * 1001}, "first_bound"),
    ({"first_bound": ["w" * 101]}, "first_bound"),
    ({"surprise": 1}, "surprise"),
])
def test_a_tally_out_of_bounds_is_a_400_that_records_nothing(
        agent, claimed, change, field, django_capture_on_commit_callbacks):  # noqa: F811
    before = samples()
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post("/api/configs/backend/east/agent/messages", {"messages": [
            {"id": "h1", "type": "heartbeat"},
            {"id": "c1", "type": "cycle", "payload": cycle(tally=tally(**change))}]},
            format="json")
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"code", "detail", "errors"}
    assert body["code"] == "invalid_request"
    assert [key for key in body["errors"]
            if key.startswith(f"messages.1.payload.tally.{field}")] != [], body["errors"]
    assert changes(before) == {}
    assert not SchedulerCycle.objects.filter(backend="east").exists()
    assert AgentMessage.objects.count() == 0
