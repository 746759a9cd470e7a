"""The product's pods meet kubelet's admission (the stand-in of ``kubelet.py``) on the real API
server: a pod whose nodeSelector (from the pool's platform) the node matches runs, one bound to a
node that does not match is refused; of two pods bound in a race to a node that fits one, the
second is refused. A refused pod never ran: its task ends FAILED with reason
``kubelet_rejected`` and no exit code, and the workflow fails with it."""

from __future__ import annotations

import pytest

from tests import factories
from tests.k8s.conftest import submit, workflow

from .kubelet import Kubelet, overcommitted

pytestmark = pytest.mark.django_db

H100 = {"nvidia.com/gpu.product": "H100"}


def one_task(name: str, gpus: int, platform: str | None = None) -> str:
    on = f", platform: {platform}" if platform else ""
    return f"""
workflow:
  name: {name}
  groups:
  - name: g
    tasks:
    - {{name: t0, image: nvcr.io/x:1, command: [train], resource: r, lead: true}}
  resources:
    r: {{gpu: {gpus}, cpu: 2, memory: 8Gi{on}}}
"""


def task_of(client, name: str) -> tuple[str, str, str | None, str | None, int | None]:
    body = workflow(client, name)
    task = body["groups"][0]["tasks"][0]
    return body["status"], task["status"], task["node"], task["reason"], task["exit_code"]


@pytest.fixture
def stand_in(apiserver, namespace):
    return Kubelet(apiserver, namespace)


def test_a_node_selector_pod_runs_on_the_matching_node_and_is_refused_on_another(
        backend, cluster, alice, stand_in, namespace, apiserver) -> None:
    factories.pool("team", 64, platforms={"h100": {"description": "H100 nodes",
                                                   "node_selector": H100}})
    matching, other = f"{namespace}-h100", f"{namespace}-a100"
    cluster.add_node(matching, gpus=8, labels=H100)
    cluster.add_node(other, gpus=8, labels={"nvidia.com/gpu.product": "A100"})
    fits = submit(alice, "team", one_task("fits", 2, "h100"))
    misplaced = submit(alice, "team", one_task("misplaced", 2, "h100"))
    backend.dispatch()
    for name in (fits, misplaced):
        assert cluster.get("pods", f"{name}-g-t0")["spec"]["nodeSelector"] == H100
    cluster.bind(f"{fits}-g-t0", matching)
    cluster.bind(f"{misplaced}-g-t0", other)  # a scheduler's stale view: kubelet checks again
    stand_in.step_now()
    assert stand_in.started == [f"{fits}-g-t0"]
    status = cluster.get("pods", f"{misplaced}-g-t0")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "NodeAffinity")
    backend.listen()
    assert task_of(alice, fits) == ("RUNNING", "RUNNING", matching, None, None)
    # the listener saw no bound Pending pod first, and a final report records no node
    assert task_of(alice, misplaced) == ("FAILED", "FAILED", None, "kubelet_rejected", None)


def test_the_second_of_two_pods_bound_in_a_race_is_refused_and_its_task_fails(
        backend, cluster, alice, stand_in, namespace, apiserver) -> None:
    factories.pool("team", 64)
    node = f"{namespace}-one-fits"
    cluster.add_node(node, gpus=4)
    first = submit(alice, "team", one_task("first", 4))
    second = submit(alice, "team", one_task("second", 4))
    backend.dispatch()
    cluster.bind(f"{first}-g-t0", node)
    cluster.bind(f"{second}-g-t0", node)  # two binds on one free node: only one fits
    backend.listen()
    assert [task_of(alice, name)[1:3] for name in (first, second)] == [
        ("SCHEDULING", node), ("SCHEDULING", node)]
    stand_in.step_now()  # kubelet admits in creation order
    assert stand_in.started == [f"{first}-g-t0"]
    assert [(r.pod, r.reason, r.message) for r in stand_in.refused] == [
        (f"{second}-g-t0", "OutOfnvidia.com/gpu",
         "Node didn't have enough resource: nvidia.com/gpu, requested: 4, used: 4, capacity: 4")]
    backend.listen()
    assert task_of(alice, first) == ("RUNNING", "RUNNING", node, None, None)
    assert task_of(alice, second) == ("FAILED", "FAILED", node, "kubelet_rejected", None)
    # the race over-committed the node until kubelet refused the second pod, which holds nothing
    assert stand_in.overcommits == [f"node {node}: nvidia.com/gpu requested 8 > allocatable 4"]
    pods = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert overcommitted(pods, apiserver.request("GET", "/api/v1/nodes")["items"]) == []
