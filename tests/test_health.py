from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Backend, ClusterBackendStatus

READY = {"ok": True, "missing": []}
UNREPORTED = {"ok": None, "missing": []}
DEFAULT = {"default": {"status": "ONLINE", "online": True, "heartbeat_age": None,
                       "placement": READY}}


@pytest.mark.django_db
def test_health_reports_database_and_broker(client, broker_url):
    response = client.get("/api/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok",
                               "backends": DEFAULT}


@pytest.mark.django_db
def test_health_reports_a_broker_outage(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.get("/api/health")
    assert response.status_code == 503
    assert response.json() == {"status": "degraded", "database": "ok", "broker": "down",
                               "backends": DEFAULT}


@pytest.mark.django_db
def test_health_reports_each_backend_and_an_offline_one_keeps_it_ok(client, broker_url,
                                                                    settings):
    settings.OSMO_BACKEND_LEASE = 30
    now = timezone.now()
    Backend.objects.create(name="far", kind="kubernetes",
                           last_heartbeat=now - timedelta(seconds=90))
    Backend.objects.create(name="near", kind="kubernetes",
                           last_heartbeat=now - timedelta(seconds=5))
    Backend.objects.create(name="held", kind="kubernetes", maintenance=True,
                           last_heartbeat=now - timedelta(seconds=5))
    Backend.objects.create(name="new", kind="kubernetes")  # no agent has connected
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    ages = {name: part.pop("heartbeat_age") for name, part in body["backends"].items()}
    assert body == {"status": "ok", "database": "ok", "broker": "ok", "backends": {
        "default": {"status": "ONLINE", "online": True, "placement": READY},
        "far": {"status": "OFFLINE", "online": False, "placement": UNREPORTED},
        "held": {"status": "MAINTENANCE", "online": True, "placement": UNREPORTED},
        "near": {"status": "ONLINE", "online": True, "placement": UNREPORTED},
        "new": {"status": "OFFLINE", "online": False, "placement": UNREPORTED}}}
    assert ages["default"] is None and ages["new"] is None
    assert 90 <= ages["far"] < 100 and 5 <= ages["near"] < 15 and 5 <= ages["held"] < 15


@pytest.mark.django_db
def test_what_kai_placement_lacks_is_reported_and_leaves_health_ok(client, broker_url,
                                                                   settings):
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    missing = [{"requirement": "priorityclass", "detail": "PriorityClass osmo-low does not "
                                                          "exist"}]
    ClusterBackendStatus.objects.create(pk=1, ok=True, checked_at=timezone.now(),
                                        placement_missing=missing)
    response = client.get("/api/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok",
                               "cluster": "ok", "backends": {"default": {
                                   **DEFAULT["default"],
                                   "placement": {"ok": False, "missing": missing}}},
                               "placement": {"ok": False, "missing": missing}}
    ClusterBackendStatus.objects.filter(pk=1).update(placement_missing=[])
    assert client.get("/api/health").json()["placement"] == {"ok": True, "missing": []}


@pytest.mark.django_db
def test_each_backend_says_whether_its_placement_is_ready(client, broker_url):
    now = timezone.now()
    Backend.objects.create(name="east", kind="kubernetes", last_heartbeat=now)
    Backend.objects.create(name="west", kind="kubernetes", last_heartbeat=now)
    Backend.objects.create(name="sim", kind="embedded")
    missing = [{"requirement": "crd", "detail": "KAI's CRD queues.scheduling.run.ai "
                                                "(scheduling.run.ai/v2) is not installed"}]
    ClusterBackendStatus.objects.create(backend="east", ok=True, checked_at=now,
                                        placement_missing=missing)
    ClusterBackendStatus.objects.create(backend="west", ok=True, checked_at=now,
                                        placement_missing=[])
    backends = client.get("/api/health").json()["backends"]
    assert {name: part["placement"] for name, part in backends.items()} == {
        "default": READY, "east": {"ok": False, "missing": missing}, "west": READY,
        "sim": READY}
