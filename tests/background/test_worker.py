"""The drain monitor on a real broker and real `celery worker` processes."""

from __future__ import annotations

import time

import pytest

from pools.models import Pool, PoolEvent
from tests import factories
from tests.background.conftest import wait_for
from tests.conftest import make_client
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

ARCHIVE_SECONDS = 15


def state(subpool: Pool) -> str:
    return Pool.objects.get(pk=subpool.pk).subpool_state


def archived_events(subpool: Pool) -> int:
    return PoolEvent.objects.filter(pool=subpool, action="subpool_archived").count()


def report(backend, workflow: Workflow, status: str):
    return backend.post(f"/api/workflow/{workflow.name}/task/task-0/status",
                        {"status": status}, format="json")


@pytest.fixture
def team():
    return factories.pool("team", 10)


@pytest.fixture
def clients():
    return (make_client("platform-admin", "osmo-admin"),
            make_client("listener", "osmo-backend"))


def delete_subpool(admin, subpool: Pool):
    return admin.delete(f"/api/configs/pool/team/subpool/{subpool.subpool_name}")


def test_a_drained_subpool_is_archived_by_the_worker(team, clients, start_celery):
    admin, backend = clients
    worker = start_celery("worker")
    sub = factories.subpool(team, "a", 4)
    workflow = factories.running_workflow(sub, 2)

    response = delete_subpool(admin, sub)
    assert (response.status_code, response.json()["state"]) == (202, "DELETING")
    wait_for(lambda: "succeeded in" in worker.output(), 10, "the delete's own drain check")
    assert state(sub) == "DELETING"  # it ran while the workflow still ran: nothing to do

    assert report(backend, workflow, "COMPLETED").status_code == 200
    wait_for(lambda: state(sub) == "ARCHIVED", ARCHIVE_SECONDS, "the subpool to be archived")
    assert archived_events(sub) == 1
    event = PoolEvent.objects.get(pool=sub, action="subpool_archived")
    assert (event.actor, event.before["state"], event.after["state"]) == (
        None, "DELETING", "ARCHIVED")
    assert "pools.tasks.drain_check" in worker.output()  # the worker did it, not this process


def test_concurrent_checks_on_two_workers_archive_once(team, clients, start_celery):
    from pools import tasks

    workers = [start_celery("worker", "w1"), start_celery("worker", "w2")]
    subpools = [factories.subpool(team, name, 1) for name in "abcd"]
    workflows = [factories.running_workflow(sub, 1) for sub in subpools]
    admin, _ = clients
    for sub in subpools:
        assert delete_subpool(admin, sub).status_code == 202
    # The workflows end without any dispatch, then a burst of sweeps and targeted checks
    # lands on both workers at once.
    Workflow.objects.filter(pk__in=[w.pk for w in workflows]).update(status="COMPLETED")
    for _ in range(10):
        tasks.drain_check.apply_async(retry=False)
        for sub in subpools:
            tasks.subpool_drain_check.apply_async(kwargs={"subpool_id": sub.pk}, retry=False)

    wait_for(lambda: all(state(sub) == "ARCHIVED" for sub in subpools), ARCHIVE_SECONDS,
             "every subpool to be archived")
    wait_for(lambda: all(" succeeded in " in w.output() for w in workers), 5,
             "both workers to have run checks")
    time.sleep(1)  # late duplicates (and contended retries) have run: still once each
    assert [archived_events(sub) for sub in subpools] == [1, 1, 1, 1]


def test_a_broker_outage_delays_the_transition_but_does_not_lose_it(
        team, clients, start_celery, restartable_broker, client, caplog):
    from pools import drain

    admin, backend = clients
    worker = start_celery("worker")
    sub = factories.subpool(team, "a", 4)
    workflow = factories.running_workflow(sub, 2)
    assert delete_subpool(admin, sub).status_code == 202
    wait_for(lambda: "succeeded in" in worker.output(), 10, "the delete's own drain check")

    restartable_broker.stop()
    health = client.get("/api/health")
    assert (health.status_code, health.json()["broker"]) == (503, "down")
    started = time.monotonic()
    response = report(backend, workflow, "COMPLETED")  # its drain check cannot be queued
    assert response.status_code == 200
    assert time.monotonic() - started < 1.5  # a broker outage costs at most about a second
    assert "drain_check not queued: broker unavailable" in caplog.text
    assert Workflow.objects.get(pk=workflow.pk).status == "COMPLETED"
    time.sleep(1)
    assert state(sub) == "DELETING"

    restartable_broker.start()
    assert client.get("/api/health").status_code == 200
    # What beat does on its next tick: the sweep re-examines every DELETING subpool.
    wait_for(lambda: drain.publish(drain.DRAIN_CHECK), 10, "a publish to the new broker")
    wait_for(lambda: state(sub) == "ARCHIVED", 30, "the subpool to be archived")
    assert archived_events(sub) == 1
    assert "pools.tasks.drain_check" in worker.output()
