"""`celery beat` runs the periodic drain check at `OSMO_DRAIN_CHECK_INTERVAL`: a DELETING
subpool whose last workflow ended while no check could be queued is still archived."""

from __future__ import annotations

import pytest
from kombu.exceptions import OperationalError

from pools import drain
from pools.models import Pool, PoolEvent
from tests import factories
from tests.background.conftest import wait_for
from tests.conftest import make_client
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def test_beat_archives_a_subpool_whose_dispatch_was_lost(start_celery, monkeypatch, caplog):
    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to the broker. Connection refused.")

    # This process cannot queue anything (as in a broker outage); beat and the worker can.
    monkeypatch.setattr(drain.app, "send_task", broker_down)
    admin = make_client("platform-admin", "osmo-admin")
    backend = make_client("listener", "osmo-backend")
    sub = factories.subpool(factories.pool("team", 10), "a", 4)
    workflow = factories.running_workflow(sub, 2)
    assert admin.delete("/api/configs/pool/team/subpool/a").status_code == 202
    response = backend.post(f"/api/workflow/{workflow.name}/task/task-0/status",
                            {"status": "COMPLETED"}, format="json")
    assert response.status_code == 200
    assert caplog.text.count("drain_check not queued: broker unavailable") == 2
    assert Workflow.objects.get(pk=workflow.pk).status == "COMPLETED"
    assert Pool.objects.get(pk=sub.pk).subpool_state == "DELETING"

    worker = start_celery("worker")
    beat = start_celery("beat", OSMO_DRAIN_CHECK_INTERVAL="1")
    wait_for(lambda: Pool.objects.get(pk=sub.pk).subpool_state == "ARCHIVED", 15,
             "beat's drain check to archive the subpool")
    assert PoolEvent.objects.filter(pool=sub, action="subpool_archived").count() == 1
    wait_for(lambda: "Sending due task subpool-drain-check" in beat.output(), 5, "beat's log")
    assert "pools.tasks.drain_check" in worker.output()
