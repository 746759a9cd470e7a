"""A task whose one pod needs more GPUs than any node of the pool has is refused at every
priority (LOW skips the quota checks, not the cluster's shape); a pool with no nodes is not
judged."""

from __future__ import annotations

import pytest

from tests import factories
from tests.conftest import make_client
from tests.scheduler.conftest import add_nodes
from tests.workflows.conftest import PLATFORMS, gpu_spec, submit
from workflows import node_fit
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_nodes():
    node_fit.forget()  # what another test's nodes left kept
    yield
    node_fit.forget()

MESSAGE = ("one pod of task 'main' needs 32 GPUs, but the largest node of pool 'big' has 8: it "
           "could never run at any priority; split it into tasks of at most 8 GPUs")


@pytest.fixture
def admin(db):
    return make_client("root", "osmo-admin")


@pytest.fixture
def big(db):
    factories.pool("big", 64)
    return make_client("ml", "osmo-big-user")


def stored() -> tuple:
    return list(Workflow.objects.values_list("name", flat=True)), Task.objects.count()


@pytest.mark.parametrize("priority", ["LOW", "NORMAL", "HIGH"])
def test_a_pod_larger_than_every_node_is_refused(admin, big, priority):
    add_nodes(admin, 2, gpus=8)
    before = stored()
    response = submit(big, "big", gpu_spec(32), priority)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid_spec"
    assert response.json()["errors"] == {"workflow.tasks[0].resource": [MESSAGE]}
    assert stored() == before
    dry = big.post("/api/pool/big/workflow?priority=LOW&dry_run=true",
                   {"file": gpu_spec(32)}, format="json")
    assert (dry.status_code, dry.json()["code"]) == (400, "invalid_spec")


def test_a_pod_that_one_node_holds_is_admitted_at_low(admin, big):
    add_nodes(admin, 1, gpus=8)
    add_nodes(admin, 1, gpus=32, prefix="wide")
    response = submit(big, "big", gpu_spec(32), "LOW")
    assert (response.status_code, response.json()["gpus_requested"]) == (201, 32)


def test_a_pool_with_no_nodes_is_not_judged(big):
    response = submit(big, "big", gpu_spec(32), "LOW")
    assert response.status_code == 201, response.json()


def test_a_kept_figure_never_refuses_after_a_larger_node_came(admin, big):
    add_nodes(admin, 1, gpus=8)
    assert submit(big, "big", gpu_spec(8), "LOW").status_code == 201  # 8 kept
    add_nodes(admin, 1, gpus=32, prefix="wide")
    response = submit(big, "big", gpu_spec(32), "LOW")
    assert response.status_code == 201, response.json()


def test_cordoned_nodes_do_not_count(admin, big):
    add_nodes(admin, 1, gpus=8)
    add_nodes(admin, 1, gpus=64, prefix="wide")
    cordon = admin.patch("/api/cluster/nodes/wide-0", {"schedulable": False}, format="json")
    assert cordon.status_code == 200, cordon.json()
    assert submit(big, "big", gpu_spec(32), "LOW").json()["errors"] == {
        "workflow.tasks[0].resource": [MESSAGE]}


def test_the_platform_of_the_task_selects_the_nodes(admin):
    factories.pool("plat", 64, platforms=PLATFORMS, default_platform="dgx-h100")
    client = make_client("p", "osmo-plat-user")
    for name, product, gpus in (("h100", "H100", 8), ("l40", "L40", 64)):
        response = admin.post("/api/cluster/nodes", {
            "name": name, "gpus": gpus, "cpu": 64, "memory": "512Gi",
            "labels": {"nvidia.com/gpu.product": product}}, format="json")
        assert response.status_code == 201, response.json()
    response = submit(client, "plat", gpu_spec(32), "LOW")
    assert response.json()["errors"] == {"workflow.tasks[0].resource": [
        "one pod of task 'main' needs 32 GPUs, but the largest node of platform 'dgx-h100' of "
        "pool 'plat' has 8: it could never run at any priority; split it into tasks of at most "
        "8 GPUs"]}
    on_l40 = gpu_spec(32).replace("memory: 1Gi", "memory: 1Gi\n      platform: ovx-l40")
    assert submit(client, "plat", on_l40, "LOW").status_code == 201
