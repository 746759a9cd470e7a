"""Status path, the cases only the emulator can produce.

The real-API-server tier (tests/kube_real) covers the status path end to end — pods moved as
KAI and the kubelet move them, preemption, deletes, the 410 after a restart, cancel, sweeps,
nodes. What stays here needs the emulator: an API server answering 500 to every request (a real
one cannot be made to), and a 403 on one object kind only."""

from __future__ import annotations

import pytest

from scheduler.backends.kubernetes.dispatch import ClusterUnavailable
from scheduler.backends.kubernetes.reasons import pending_publish
from workflows.models import Task

from .conftest import spec, statuses, submit

pytestmark = pytest.mark.django_db


def test_an_api_outage_loses_nothing_and_converges(backend, cluster, alice, team) -> None:
    first = submit(alice, "team", spec("first"))
    cluster.outage = 500
    with pytest.raises(ClusterUnavailable):
        backend.dispatch()
    with pytest.raises(Exception) as raised:
        backend.listen()
    assert getattr(raised.value, "status", None) == 500
    second = submit(alice, "team", spec("second"))
    cluster.outage = None
    assert backend.dispatch().applied == [f"{first}-g", f"{second}-g"]
    backend.listen()
    # The server goes away entirely while pods move on; the listener resumes where it was.
    cluster.run(f"{first}-g-t0", "n1")
    cluster.stop()
    with pytest.raises(Exception):  # noqa: B017 - connection refused, whatever its class
        backend.listen()
    cluster.finish(f"{first}-g-t0")
    cluster.run(f"{second}-g-t0", "n2")
    cluster.start()
    backend.listen()
    assert statuses(alice, first) == ("COMPLETED", ["COMPLETED"])
    assert statuses(alice, second) == ("RUNNING", ["RUNNING"])


def test_the_embedded_loop_places_nothing_on_the_kubernetes_backend(backend, admin, alice,
                                                                    team) -> None:
    admin.post("/api/cluster/nodes", {"name": "n1", "gpus": 8, "cpu": 8, "memory": "8Gi",
                                      "labels": {}}, format="json")
    name = submit(alice, "team", spec("not-here"))
    assert admin.post("/api/scheduler/cycle").json()["bound"] == 0
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"])
    assert Task.objects.get().node_name == ""


def test_explain_shows_why_the_cluster_has_not_accepted_a_group(backend, cluster, alice,
                                                                team) -> None:
    name = submit(alice, "team", spec("refused"))
    cluster.fail_next("POST", "pods", 403)
    backend.dispatch()
    pending_publish()
    reasons = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0]["reasons"]
    assert [r["code"] for r in reasons] == ["dispatch_failed"]
    assert "403" in reasons[0]["message"]

