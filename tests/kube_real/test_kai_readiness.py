"""What KAI placement needs from the cluster (``kai_readiness``), checked on the real API server
under the backend's least-privilege token: KAI's CRDs, the OSMO PriorityClasses, and a scheduler
that acts on our PodGroups. This module runs no KAI: a dispatched group waits without a word
from any scheduler, and ``explain`` says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.backends.kubernetes import reasons
from scheduler.backends.kubernetes.health import Health, placement_missing
from scheduler.backends.kubernetes.kai_readiness import (
    SILENT_AFTER_SECONDS,
    requirements_missing,
    silent_groups,
)
from scheduler.models import GroupDispatch
from tests.conftest import make_client
from tests.k8s.conftest import spec, statuses, submit

from .conftest import wait_for
from .server import CRDS, KubeError, load_documents

pytestmark = pytest.mark.django_db

BINDREQUESTS_CRD = "bindrequests.scheduling.run.ai"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd_exists(apiserver) -> bool:
    try:
        apiserver.request("GET", f"{CRD_PATH}/{BINDREQUESTS_CRD}")
        return True
    except KubeError as exc:
        if exc.status == 404:
            return False
        raise


def test_a_cluster_with_what_kai_needs_lacks_nothing(backend) -> None:
    assert requirements_missing(backend.kube) == []


def test_a_missing_priority_class_is_named(backend, apiserver) -> None:
    low = apiserver.request("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/osmo-low")
    apiserver.request("DELETE", "/apis/scheduling.k8s.io/v1/priorityclasses/osmo-low")
    try:
        assert requirements_missing(backend.kube) == [
            {"requirement": "priorityclass", "detail": "PriorityClass osmo-low does not exist"}]
    finally:
        apiserver.create({key: low[key] for key in ("apiVersion", "kind", "value",
                                                    "description", "preemptionPolicy")
                          if key in low} | {"metadata": {"name": "osmo-low"}})
    assert requirements_missing(backend.kube) == []


def test_a_missing_kai_crd_is_named(backend, apiserver) -> None:
    (crd,) = load_documents(CRDS / "scheduling.run.ai_bindrequests.yaml")
    apiserver.request("DELETE", f"{CRD_PATH}/{BINDREQUESTS_CRD}")
    try:
        wait_for(lambda: requirements_missing(backend.kube), 30, what="discovery to drop it")
        assert requirements_missing(backend.kube) == [{
            "requirement": "crd", "detail": "KAI's CRD bindrequests.scheduling.run.ai "
                                            "(scheduling.run.ai/v1alpha2) is not installed"}]
    finally:
        wait_for(lambda: not crd_exists(apiserver), 30, what="the CRD gone")
        apiserver.create(crd)
        wait_for(lambda: not requirements_missing(backend.kube), 30, what="the CRD back")


def test_a_group_no_scheduler_acts_on_is_explained_and_reported(backend, cluster, alice, team,
                                                                settings) -> None:
    cluster.add_node("idle-n1", gpus=8)
    name = submit(alice, "team", spec("unheard", gpus=8))
    assert backend.dispatch().applied == [f"{name}-g"]
    backend.listen()
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"])
    (applied,) = GroupDispatch.objects.filter(group__workflow__name=name).values_list(
        "applied_at", flat=True)
    early = applied + timedelta(seconds=SILENT_AFTER_SECONDS - 1)
    late = applied + timedelta(seconds=SILENT_AFTER_SECONDS + 1)
    assert not silent_groups(early).exists()
    reasons.pending_publish(now=early)
    early_reasons = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0]["reasons"]
    assert [r["code"] for r in early_reasons] == ["not_yet_scheduled"]

    reasons.pending_publish(now=late)
    (reason,) = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0]["reasons"]
    assert reason["code"] == "scheduler_silent"
    assert reason["message"] == (
        "no scheduler has bound a pod of this PodGroup or said why for over 60 s: is KAI "
        "Scheduler running (schedulerName kai-scheduler)?")
    missing = requirements_missing(backend.kube, now=late)
    assert missing == [{"requirement": "scheduler", "detail": (
        "no scheduler has acted on 1 PodGroup(s) for over 60 s: is KAI Scheduler running "
        "(schedulerName kai-scheduler)?")}]

    health = Health()  # as the leader keeps it: the API server reached, KAI's parts missing
    health.report("api", True)
    health.placement(missing)
    health.write(0.0)
    assert placement_missing() == missing
    body = alice.get("/api/health").json()
    assert body["cluster"] == "ok"
    assert body["placement"] == {"ok": False, "missing": missing}
    assert placement_gauge(make_client("root", "osmo-admin")) == {
        "crd": 0, "priorityclass": 0, "scheduler": 1}


def placement_gauge(client) -> dict[str, float]:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    return {sample.labels["requirement"]: sample.value
            for family in text_string_to_metric_families(answer.content.decode())
            if family.name == "osmo_backend_placement_missing" for sample in family.samples}
