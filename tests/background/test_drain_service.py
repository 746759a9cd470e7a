"""The DELETING → ARCHIVED transition and the drain tasks' own logic, in process (no broker)."""

from __future__ import annotations

import threading

import pytest
from celery.exceptions import Retry
from django.db import OperationalError, connection, transaction
from kombu.exceptions import OperationalError as BrokerError

from pools import drain, tasks
from pools.models import Pool, PoolEvent
from pools.services import subpool_archive_if_drained
from tests import factories
from tests.races import together
from workflows.models import Workflow


def deleting_subpool(team: Pool, name: str, *, drained: bool) -> Pool:
    """A DELETING subpool (its workflow still runs unless `drained`)."""
    sub = factories.subpool(team, name, 1)
    workflow = factories.running_workflow(sub, 1)
    Pool.objects.filter(pk=sub.pk).update(subpool_state="DELETING")
    if drained:
        Workflow.objects.filter(pk=workflow.pk).update(status="COMPLETED")
    return sub


def state(subpool: Pool) -> str:
    return Pool.objects.get(pk=subpool.pk).subpool_state


def archived_events(subpool: Pool) -> int:
    return PoolEvent.objects.filter(pool=subpool, action="subpool_archived").count()


@pytest.fixture
def team(db):
    return factories.pool("team", 10)


@pytest.fixture
def published(monkeypatch) -> list[tuple[str, dict]]:
    """What the tasks queue, instead of a broker."""
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(drain.app, "send_task",
                        lambda name, kwargs=None, **options: sent.append((name, kwargs or {})))
    return sent


# --- the service -----------------------------------------------------------------------------

def test_a_subpool_with_an_alive_workflow_stays_deleting(team):
    sub = deleting_subpool(team, "a", drained=False)
    assert subpool_archive_if_drained(subpool_id=sub.pk) is False
    assert (state(sub), archived_events(sub)) == ("DELETING", 0)


def test_a_drained_subpool_is_archived_once_with_a_system_audit_event(team):
    sub = deleting_subpool(team, "a", drained=True)
    assert subpool_archive_if_drained(subpool_id=sub.pk) is True
    assert subpool_archive_if_drained(subpool_id=sub.pk) is False
    assert state(sub) == "ARCHIVED"
    event = PoolEvent.objects.get(pool=sub, action="subpool_archived")
    assert (event.actor, event.actor_name) == (None, None)
    assert event.before == {"name": "team--a", "subpool_name": "a", "state": "DELETING",
                            "quota_gpus": 1}
    assert event.after == {**event.before, "state": "ARCHIVED"}


def test_only_deleting_subpools_are_touched(team):
    active = factories.subpool(team, "a", 1)
    archived = deleting_subpool(team, "b", drained=True)
    Pool.objects.filter(pk=archived.pk).update(subpool_state="ARCHIVED")
    for pk in (active.pk, archived.pk, team.pk, 10**9):
        assert subpool_archive_if_drained(subpool_id=pk) is False
    assert (state(active), state(archived)) == ("ACTIVE", "ARCHIVED")
    assert PoolEvent.objects.filter(action="subpool_archived").count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_transition_once():
    team = factories.pool("team", 10)
    subpools = [deleting_subpool(team, name, drained=True) for name in "abcdef"]
    for sub in subpools:
        results = together([lambda pk=sub.pk: subpool_archive_if_drained(subpool_id=pk)
                                 for _ in range(4)], timeout=30)
        assert sorted(results) == [False, False, False, True]
        assert (state(sub), archived_events(sub)) == ("ARCHIVED", 1)


@pytest.mark.django_db(transaction=True)
def test_a_check_that_meets_a_held_row_skips_it_and_tries_again(published):
    team = factories.pool("team", 10)
    sub = deleting_subpool(team, "a", drained=True)
    holding, release = threading.Event(), threading.Event()

    def hold_row():
        try:
            with transaction.atomic():
                Pool.objects.select_for_update().get(pk=sub.pk)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_row)
    holder.start()
    try:
        assert holding.wait(10)
        assert subpool_archive_if_drained(subpool_id=sub.pk) is False  # skip_locked: no wait
        with pytest.raises(Retry):  # called directly, a retry surfaces as Retry
            tasks.subpool_drain_check(subpool_id=sub.pk)
        assert tasks.drain_check() == 0
        assert published == [("pools.tasks.subpool_drain_check", {"subpool_id": sub.pk})]
    finally:
        release.set()
        holder.join(10)
    assert tasks.subpool_drain_check(subpool_id=sub.pk) == 1
    assert (state(sub), archived_events(sub)) == ("ARCHIVED", 1)


# --- the tasks -------------------------------------------------------------------------------

def test_the_sweep_takes_bounded_batches_and_queues_the_next(team, published, monkeypatch):
    monkeypatch.setattr(tasks, "DRAIN_BATCH", 2)
    busy = deleting_subpool(team, "a", drained=False)
    drained = [deleting_subpool(team, name, drained=True) for name in "bcd"]
    factories.subpool(team, "e", 1)  # ACTIVE: not the sweep's business

    assert tasks.drain_check() == 1  # busy and b
    assert published == [("pools.tasks.drain_check", {"after_id": drained[0].pk})]
    assert tasks.drain_check(after_id=drained[0].pk) == 2  # c and d: a full batch again
    assert published[-1] == ("pools.tasks.drain_check", {"after_id": drained[2].pk})
    assert tasks.drain_check(after_id=drained[2].pk) == 0  # nothing left: the chain ends
    assert len(published) == 2
    assert [state(s) for s in (busy, *drained)] == ["DELETING", *["ARCHIVED"] * 3]
    assert tasks.drain_check() == 0  # a second sweep changes nothing
    assert PoolEvent.objects.filter(action="subpool_archived").count() == 3


def test_database_errors_are_retried_with_backoff_a_bounded_number_of_times(monkeypatch):
    calls = []

    def failing(**kwargs):
        calls.append(kwargs)
        raise OperationalError("connection to server lost")

    monkeypatch.setattr("pools.services.subpool_archive_if_drained", failing)
    task = tasks.subpool_drain_check
    assert (task.max_retries, task.retry_backoff, task.retry_jitter) == (5, True, True)
    result = task.apply(kwargs={"subpool_id": 7})  # eager: retries run at once, in process
    assert isinstance(result.result, OperationalError)
    assert len(calls) == 1 + 5


def test_a_programming_error_is_not_retried(monkeypatch):
    calls = []

    def broken(**kwargs):
        calls.append(kwargs)
        raise KeyError("bug")

    monkeypatch.setattr("pools.services.subpool_archive_if_drained", broken)
    result = tasks.subpool_drain_check.apply(kwargs={"subpool_id": 7})
    assert isinstance(result.result, KeyError)
    assert len(calls) == 1


# --- dispatch --------------------------------------------------------------------------------

def test_checks_are_queued_only_once_the_transaction_commits(
        team, published, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        drain.drain_check_on_commit(subpool_id=41)
        drain.drain_check_on_commit()
        assert published == []
    assert len(callbacks) == 2
    assert published == [("pools.tasks.subpool_drain_check", {"subpool_id": 41}),
                         ("pools.tasks.drain_check", {})]


def test_a_broker_outage_is_logged_not_raised(monkeypatch, caplog,
                                             django_capture_on_commit_callbacks, db):
    def broker_down(*args, **kwargs):
        raise BrokerError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    monkeypatch.setattr(drain.app, "send_task", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        drain.drain_check_on_commit(subpool_id=41)
    assert "pools.tasks.subpool_drain_check not queued: broker unavailable" in caplog.text


def test_a_delete_and_a_workflows_end_ask_for_a_check(
        team, published, django_capture_on_commit_callbacks):
    from pools.services import subpool_delete
    from workflows.lifecycle import task_report_status

    sub = factories.subpool(team, "a", 2)
    other = factories.subpool(team, "b", 2)
    workflow = factories.running_workflow(sub, 1)
    unrelated = factories.running_workflow(other, 1)
    with django_capture_on_commit_callbacks(execute=True):
        subpool_delete(actor=None, subpool=sub)
    assert len(published) == 1
    with django_capture_on_commit_callbacks(execute=True):
        task_report_status(workflow=unrelated, task_name="task-0", status="COMPLETED")
    assert len(published) == 1  # its subpool is ACTIVE: nothing to drain
    with django_capture_on_commit_callbacks(execute=True):
        task_report_status(workflow=workflow, task_name="task-0", status="COMPLETED")
    assert len(published) == 2
    assert {name for name, _ in published} <= {"pools.tasks.drain_check",
                                                "pools.tasks.subpool_drain_check"}
