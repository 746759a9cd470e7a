"""The API side of background work: it keeps working while the broker is unreachable, health
says so, and platform admins can read the effective drain check interval."""

from __future__ import annotations

import time

import kombu.pools
import pytest

from osmo.celery import app as celery_app
from osmo.embedded import free_port
from pools.models import Pool
from tests import factories
from tests.conftest import make_client


def elapsed(request):
    started = time.monotonic()
    response = request()
    return response, time.monotonic() - started


def _use_broker(url: str) -> None:
    # The app caches its connection pools, and kombu keeps them process-wide, one per broker
    # URL: close and forget them all so the next publish dials `url`. (Closing the app's pool
    # only would leave the real broker's pool closed in kombu's registry for every later test
    # of the session that publishes: "Acquire on closed pool".)
    celery_app.conf.broker_url = url
    kombu.pools.reset()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def unreachable_broker(settings):
    """Broker URL pointing at a closed port, for the Celery app and for the health check."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    saved = celery_app.conf.broker_url
    settings.CELERY_BROKER_URL = url
    _use_broker(url)
    yield url
    _use_broker(saved)


@pytest.mark.django_db(transaction=True)  # on-commit dispatch really runs
def test_submit_delete_and_reports_work_while_the_broker_is_unreachable(
        unreachable_broker, client, caplog):
    from tests.workflows.conftest import gpu_spec

    admin = make_client("platform-admin", "osmo-admin")
    backend = make_client("listener", "osmo-backend")
    user = make_client("ml-user", "osmo-team-user")
    sub = factories.subpool(factories.pool("team", 10), "a", 4)
    running = factories.running_workflow(sub, 2)

    response = user.post("/api/pool/team--a/workflow", {"file": gpu_spec(1)}, format="json")
    assert response.status_code == 201
    # Each publish to the closed port gives up after one reconnect attempt (about 2 s with the
    # transport's default retry interval): the request never hangs on the broker.
    response, seconds = elapsed(lambda: admin.delete("/api/configs/pool/team/subpool/a"))
    assert (response.status_code, response.json()["state"]) == (202, "DELETING")
    assert seconds < 5
    response, seconds = elapsed(lambda: backend.post(
        f"/api/workflow/{running.name}/task/task-0/status", {"status": "COMPLETED"},
        format="json"))
    assert response.status_code == 200
    assert seconds < 5
    assert caplog.text.count("drain_check not queued: broker unavailable") == 2
    assert Pool.objects.get(pk=sub.pk).subpool_state == "DELETING"  # until the next sweep

    health = client.get("/api/health")
    assert health.status_code == 503
    assert health.json() == {"status": "degraded", "database": "ok", "broker": "down",
                             "backends": {"default": {"status": "ONLINE", "online": True,
                                                      "heartbeat_age": None,
                                                      "placement": {"ok": True,
                                                                    "missing": []}}}}


@pytest.mark.django_db
def test_platform_admins_read_the_effective_drain_check_interval(settings, client):
    admin = make_client("platform-admin", "osmo-admin")
    response = admin.get("/api/configs/service")
    assert response.status_code == 200
    assert response.json() == {"drain_check_interval_seconds": settings.OSMO_DRAIN_CHECK_INTERVAL}

    # What beat runs, not merely what was asked for.
    settings.CELERY_BEAT_SCHEDULE = {
        **settings.CELERY_BEAT_SCHEDULE,
        "subpool-drain-check": {"task": "pools.tasks.drain_check", "schedule": 60.0}}
    assert admin.get("/api/configs/service").json() == {"drain_check_interval_seconds": 60}


@pytest.mark.django_db
def test_only_platform_admins_read_the_service_settings(client):
    pool_admin = make_client("team-admin", "osmo-team-admin")
    response = pool_admin.get("/api/configs/service")
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    response = client.get("/api/configs/service")
    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")


@pytest.mark.django_db
def test_the_service_settings_are_in_the_openapi_document():
    admin = make_client("platform-admin", "osmo-admin")
    schema = admin.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert "/api/configs/service" in schema["paths"]
    properties = schema["components"]["schemas"]["ServiceConfig"]["properties"]
    assert set(properties) == {"drain_check_interval_seconds"}
