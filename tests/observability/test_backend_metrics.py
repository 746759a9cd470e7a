"""`/metrics` carries each backend's reachability, heartbeat age, nodes and GPUs (used and
free), read at scrape time from the backend rows and their nodes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduler.models import Backend
from tests import factories
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes, cycle, spec, submit

pytestmark = pytest.mark.django_db

FAMILIES = ("osmo_backend_up", "osmo_backend_heartbeat_age_seconds", "osmo_backend_nodes",
            "osmo_backend_gpus")


def scrape(client) -> dict[str, dict[tuple, float]]:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    found: dict[str, dict[tuple, float]] = {name: {} for name in FAMILIES}
    for family in text_string_to_metric_families(answer.content.decode()):
        if family.name in found:
            for sample in family.samples:
                found[family.name][tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_each_backend_is_scraped_with_its_state_nodes_and_gpus(settings):
    settings.OSMO_BACKEND_LEASE = 30
    admin = make_client("root", "osmo-admin")
    alice = make_client("alice", "osmo-team-user")
    factories.pool("team", 64)
    add_nodes(admin, 2)  # default: 16 GPUs
    for name, kind in (("lab", "embedded"), ("far", "kubernetes"), ("near", "kubernetes")):
        assert admin.post(f"/api/configs/backend/{name}", {"kind": kind},
                          format="json").status_code == 201
    assert admin.post("/api/cluster/nodes", {"name": "lab-0", "gpus": 4, "cpu": 64,
                                             "memory": "512Gi", "backend": "lab"},
                      format="json").status_code == 201
    now = timezone.now()
    Backend.objects.filter(name="far").update(last_heartbeat=now - timedelta(seconds=90))
    Backend.objects.filter(name="near").update(last_heartbeat=now - timedelta(seconds=2))
    submit(alice, "team", spec("small", 6))
    assert cycle(admin)["bound"] == 1

    found = scrape(admin)
    ages = found.pop("osmo_backend_heartbeat_age_seconds")
    assert found == {
        "osmo_backend_up": {(("backend", "default"),): 1.0, (("backend", "far"),): 0.0,
                            (("backend", "lab"),): 1.0, (("backend", "near"),): 1.0},
        "osmo_backend_nodes": {(("backend", "default"),): 2.0, (("backend", "far"),): 0.0,
                               (("backend", "lab"),): 1.0, (("backend", "near"),): 0.0},
        "osmo_backend_gpus": {
            (("backend", "default"), ("state", "used")): 6.0,
            (("backend", "default"), ("state", "free")): 10.0,
            (("backend", "far"), ("state", "used")): 0.0,
            (("backend", "far"), ("state", "free")): 0.0,
            (("backend", "lab"), ("state", "used")): 0.0,
            (("backend", "lab"), ("state", "free")): 4.0,
            (("backend", "near"), ("state", "used")): 0.0,
            (("backend", "near"), ("state", "free")): 0.0},
    }
    # Embedded backends have no heartbeat, so no series.
    assert set(ages) == {(("backend", "far"),), (("backend", "near"),)}
    assert 90 <= ages[(("backend", "far"),)] < 100 and 2 <= ages[(("backend", "near"),)] < 12


def test_a_deleted_backend_leaves_no_series():
    admin = make_client("root", "osmo-admin")
    assert admin.post("/api/configs/backend/gone", {"kind": "kubernetes"},
                      format="json").status_code == 201
    assert (("backend", "gone"),) in scrape(admin)["osmo_backend_up"]
    assert admin.delete("/api/configs/backend/gone").status_code == 204
    assert set(scrape(admin)["osmo_backend_up"]) == {(("backend", "default"),)}
