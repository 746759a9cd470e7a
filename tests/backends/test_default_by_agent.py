"""A kubernetes `default` backend served by an agent (as `osmo standalone` runs one): once the
agent has registered, the service leaves the cluster to it — no Queue sync of its own, and
`/api/health`'s `cluster` follows the agent's heartbeats, not a backend process's contact."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.backends.selectors import default_served_by_agent
from scheduler.kai.sync import sync_enabled
from scheduler.models import Backend
from scheduler.tasks import kai_queue_sync
from tests.conftest import make_client

pytestmark = pytest.mark.django_db

UID = "0b8f9e8e-2222-4a4a-9c9c-000000000002"


@pytest.fixture
def kubernetes_default(settings):
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    settings.OSMO_KAI_SYNC = True
    Backend.objects.filter(name="default").update(kind="kubernetes")


def test_once_its_agent_registered_the_service_leaves_default_to_it(
        kubernetes_default, client, broker_url, settings):
    # Before any agent: this installation's own backend process serves it, and none runs.
    assert (default_served_by_agent(), sync_enabled()) == (False, True)
    response = client.get("/api/health")
    assert (response.status_code, response.json()["cluster"]) == (503, "down")

    agent = make_client("agent-default", "osmo-backend-default")
    registered = agent.post("/api/configs/backend/default/agent/register",
                            {"k8s_uid": UID, "version": "v1.31.0"}, format="json")
    assert registered.status_code == 200, registered.json()

    assert (default_served_by_agent(), sync_enabled()) == (True, False)
    # The beat's sync does nothing (it would reach for a cluster this process has none of).
    assert kai_queue_sync.run() == {"skipped": True}
    response = client.get("/api/health")
    body = response.json()
    assert (response.status_code, body["status"], body["cluster"]) == (200, "ok", "ok")
    assert (body["backends"]["default"]["status"], body["backends"]["default"]["online"]) == (
        "ONLINE", True)

    # The agent goes silent past the lease: the cluster is down as users see it.
    Backend.objects.filter(name="default").update(
        last_heartbeat=timezone.now() - timedelta(seconds=settings.OSMO_BACKEND_LEASE + 1))
    response = client.get("/api/health")
    body = response.json()
    assert (response.status_code, body["cluster"], body["backends"]["default"]["status"]) == (
        503, "down", "OFFLINE")


def test_an_embedded_default_is_never_served_by_an_agent(client, broker_url):
    agent = make_client("agent-default", "osmo-backend-default")
    response = agent.post("/api/configs/backend/default/agent/register",
                          {"k8s_uid": UID, "version": "v1.31.0"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_backend"
    assert Backend.objects.get(name="default").k8s_uid is None
    assert default_served_by_agent() is False
