"""The event bus between the apps (osmo/events.py): delivered after commit, never on rollback,
a failing subscriber logged while the others still run; and the product's subscriptions — a
submission and a cancel wake the Kubernetes backend (a NOTIFY on its channel), once committed."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction

from osmo import events
from scheduler.backends import WAKE_CHANNEL
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, submit


@pytest.fixture
def heard(monkeypatch):
    """Subscribe a recorder to PoolArchived for this test only."""
    seen: list[events.Event] = []
    monkeypatch.setitem(events._subscribers, events.PoolArchived, [seen.append])
    return seen


def test_an_event_is_delivered_after_commit_only(transactional_db, heard) -> None:
    with transaction.atomic():
        events.publish(events.PoolArchived(pool="team"))
        assert heard == []  # not before the commit
    assert heard == [events.PoolArchived(pool="team")]

    with pytest.raises(RuntimeError), transaction.atomic():
        events.publish(events.PoolArchived(pool="rolled-back"))
        raise RuntimeError
    assert heard == [events.PoolArchived(pool="team")]  # a rollback delivers nothing


def test_a_failing_subscriber_is_logged_and_the_others_run(transactional_db, monkeypatch,
                                                           caplog) -> None:
    seen = []

    def broken(event):
        raise ValueError("boom")

    monkeypatch.setitem(events._subscribers, events.PoolArchived, [broken, seen.append])
    events.publish(events.PoolArchived(pool="team"))  # outside a transaction: at once
    assert seen == [events.PoolArchived(pool="team")]
    assert "PoolArchived: subscriber" in caplog.text and "boom" in caplog.text


def test_the_scheduler_subscribes_to_every_event() -> None:
    for event_type in (events.PoolChanged, events.PoolArchived, events.WorkflowAdmitted,
                       events.WorkflowsCanceled):
        assert [h.__module__ for h in events.subscribers(event_type)] == ["scheduler.wiring"]


def _listen() -> psycopg.Connection:
    settings = connection.settings_dict
    listener = psycopg.connect(host=settings["HOST"] or None, port=settings["PORT"] or None,
                               user=settings["USER"], password=settings["PASSWORD"] or None,
                               dbname=settings["NAME"], autocommit=True)
    listener.execute(f"LISTEN {WAKE_CHANNEL}")
    return listener


def _notified(listener: psycopg.Connection) -> list[str]:
    return [n.payload for n in listener.notifies(timeout=0.5, stop_after=10)]


def test_a_submission_and_a_cancel_notify_the_backend(transactional_db, settings) -> None:
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    factories.pool("team", 64)
    alice = make_client("alice", "osmo-team-user")
    listener = _listen()
    try:
        assert _notified(listener) == []
        name = submit(alice, "team", spec("wake"))
        assert _notified(listener) == ["groups"]
        dry = alice.post("/api/pool/team/workflow?dry_run=true", {"file": spec("dry")},
                         format="json")
        assert dry.status_code == 200 and _notified(listener) == []  # a dry run admits nothing
        assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
        assert _notified(listener) == ["groups"]
    finally:
        listener.close()
