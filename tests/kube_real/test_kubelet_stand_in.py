"""The kubelet stand-in refuses what kubelet's admission refuses, on the real API server: each
refusal ends the pod ``Failed`` with kubelet's reason and message; a pod on a node that is not
Ready is not started; its own errors are raised, never swallowed."""

from __future__ import annotations

import pytest

from .kubelet import Kubelet, overcommitted
from .osmo_placement import events_for, pod


def phase(cluster, name: str) -> dict:
    return cluster.get("pods", name)["status"]


def place(apiserver, cluster, namespace, name: str, node: str, **requests) -> None:
    apiserver.create(pod(namespace, name, "none", "q", **requests))
    cluster.bind(name, node)


@pytest.fixture
def stand_in(apiserver, namespace):
    """Stepped by the test (no thread): every step is one look at the cluster."""
    return Kubelet(apiserver, namespace)


@pytest.mark.parametrize("resource, node_options, reason, message", [
    ("gpu", {"gpus": 2}, "OutOfnvidia.com/gpu",
     "Node didn't have enough resource: nvidia.com/gpu, requested: 2, used: 2, capacity: 2"),
    ("cpu", {"gpus": 8, "cpu": "1500m"}, "OutOfcpu",
     "Node didn't have enough resource: cpu, requested: 1000, used: 1000, capacity: 1500"),
    ("memory", {"gpus": 8, "memory": "1536Mi"}, "OutOfmemory",
     f"Node didn't have enough resource: memory, requested: {2**30}, used: {2**30}, "
     f"capacity: {1536 * 2**20}"),
    ("pods", {"gpus": 8, "pods": 1}, "OutOfpods",
     "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"),
])
def test_a_pod_short_of_a_resource_fails_as_kubelet_reports(
        stand_in, apiserver, cluster, namespace, resource, node_options, reason,
        message) -> None:
    node = f"{namespace}-{resource}"
    cluster.add_node(node, **node_options)
    place(apiserver, cluster, namespace, "first", node, gpus=2)  # 1 cpu, 1Gi each
    stand_in.step_now()
    place(apiserver, cluster, namespace, "second", node, gpus=2)
    stand_in.step_now()
    assert phase(cluster, "first")["phase"] == "Running"
    status = phase(cluster, "second")
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", reason, f"Pod was rejected: {message}")
    assert [(e["reason"], e["message"], e["type"]) for e in
            events_for(apiserver, namespace, "second")] == [(reason, message, "Warning")]
    assert stand_in.started == ["first"]
    assert [(r.pod, r.reason) for r in stand_in.refused] == [("second", reason)]
    with pytest.raises(AssertionError):
        stand_in.check()  # an over-committed node, and a refusal: a placement test fails
    cluster.delete_node(node)


def test_a_pod_on_a_node_that_does_not_exist_fails_as_the_pod_collector_marks_it(
        stand_in, apiserver, cluster, namespace) -> None:
    place(apiserver, cluster, namespace, "lost", f"{namespace}-nowhere", gpus=1)
    stand_in.step_now()
    status = phase(cluster, "lost")
    assert status["phase"] == "Failed"
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("DisruptionTarget", "DeletionByPodGC", "PodGC: node no longer exists")]
    assert stand_in.started == []


def test_a_pod_on_a_node_that_is_not_ready_waits_until_it_is(stand_in, apiserver, cluster,
                                                            namespace) -> None:
    node = f"{namespace}-sick"
    cluster.add_node(node, gpus=2, ready=False)
    place(apiserver, cluster, namespace, "patient", node, gpus=1)
    stand_in.step_now()
    stand_in.step_now()
    assert phase(cluster, "patient")["phase"] == "Pending"
    assert stand_in.waiting == {"patient"} and stand_in.started == []
    apiserver.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}]}},
        content_type="application/merge-patch+json")
    stand_in.step_now()
    assert phase(cluster, "patient")["phase"] == "Running"
    assert stand_in.waiting == set()
    cluster.delete_node(node)


def test_a_no_execute_taint_the_pod_does_not_tolerate(stand_in, apiserver, cluster,
                                                      namespace) -> None:
    node = f"{namespace}-tainted"
    cluster.add_node(node, gpus=2)
    apiserver.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"taints": [
        {"key": "maintenance", "value": "yes", "effect": "NoExecute"}]}},
        content_type="application/merge-patch+json")
    place(apiserver, cluster, namespace, "intolerant", node, gpus=1)
    stand_in.step_now()
    status = phase(cluster, "intolerant")
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", "TaintToleration",
        _predicate("TaintToleration", "node(s) had taints that the pod didn't tolerate"))
    cluster.delete_node(node)


def test_the_audit_sees_a_node_over_its_allocatable(apiserver, cluster, namespace) -> None:
    node = f"{namespace}-full"
    cluster.add_node(node, gpus=2)
    for name in ("a", "b"):
        place(apiserver, cluster, namespace, name, node, gpus=2)
    pods = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    nodes = apiserver.request("GET", "/api/v1/nodes")["items"]
    assert overcommitted(pods, nodes) == [
        f"node {node}: nvidia.com/gpu requested 4 > allocatable 2"]
    cluster.delete_pod("b")  # bound but never started, and being deleted: it holds nothing
    pods = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert overcommitted(pods, nodes) == []
    cluster.delete_node(node)


def test_an_error_in_the_stand_in_fails_the_test(namespace) -> None:
    class Broken:
        def request(self, *args, **kwargs):
            raise RuntimeError("the stand-in broke")

    stand_in = Kubelet(Broken(), namespace).start()
    with pytest.raises(RuntimeError, match="the stand-in broke"):
        stand_in.stop()


def test_a_test_starting_a_pod_by_hand_meets_the_same_admission(apiserver, cluster,
                                                                namespace) -> None:
    node = f"{namespace}-by-hand"
    cluster.add_node(node, gpus=2)
    for name in ("first", "second"):
        apiserver.create(pod(namespace, name, "none", "q", gpus=2))
    cluster.run("first", node)
    with pytest.raises(AssertionError, match="OutOfnvidia.com/gpu"):
        cluster.run("second", node)
    assert phase(cluster, "second")["reason"] == "OutOfnvidia.com/gpu"
    apiserver.create(pod(namespace, "third", "none", "q", gpus=1))
    with pytest.raises(AssertionError, match="DeletionByPodGC"):
        cluster.run("third", f"{namespace}-nowhere")


def _predicate(name: str, why: str) -> str:
    return f"Pod was rejected: Predicate {name} failed: {why}"


AFFINITY = _predicate("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")


@pytest.mark.parametrize("spec, admitted", [
    ({"nodeSelector": {"nvidia.com/gpu.product": "H100"}}, True),
    ({"nodeSelector": {"nvidia.com/gpu.product": "A100"}}, False),
    ({"nodeSelector": {"kubernetes.io/os": "windows"}}, False),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "rack", "operator": "In", "values": ["r2", "r3"]}]}]}}}}, False),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]},
            {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}]}}}}, True),
])
def test_a_pod_whose_node_selector_or_affinity_the_node_does_not_match_is_refused(
        stand_in, apiserver, cluster, namespace, spec, admitted) -> None:
    node = f"{namespace}-h100"
    cluster.add_node(node, gpus=2, labels={"nvidia.com/gpu.product": "H100", "rack": "r1",
                                           "kubernetes.io/os": "linux"})
    manifest = pod(namespace, "picky", "none", "q", gpus=1)
    manifest["spec"].update(spec)
    apiserver.create(manifest)
    cluster.bind("picky", node)  # a bind skips the scheduler's filters: kubelet checks again
    stand_in.step_now()
    status = phase(cluster, "picky")
    if admitted:
        assert status["phase"] == "Running" and stand_in.started == ["picky"]
    else:
        assert (status["phase"], status["reason"], status["message"]) == (
            "Failed", "NodeAffinity", AFFINITY)
        assert stand_in.started == []
        assert [(e["reason"], e["type"]) for e in events_for(apiserver, namespace, "picky")] \
            == [("NodeAffinity", "Warning")]
    cluster.delete_node(node)


def test_a_host_port_already_taken_on_the_node_is_refused(stand_in, apiserver, cluster,
                                                          namespace) -> None:
    node = f"{namespace}-ports"
    cluster.add_node(node, gpus=4)
    for name, port in (("first", 8080), ("same-port", 8080), ("other-port", 8081)):
        manifest = pod(namespace, name, "none", "q", gpus=1)
        manifest["spec"]["containers"][0]["ports"] = [
            {"containerPort": 80, "hostPort": port, "protocol": "TCP"}]
        apiserver.create(manifest)
        cluster.bind(name, node)
        stand_in.step_now()
    assert stand_in.started == ["first", "other-port"]
    status = phase(cluster, "same-port")
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", "NodePorts",
        _predicate("NodePorts", "node(s) didn't have free ports for the requested pod ports"))
    cluster.delete_node(node)


@pytest.mark.parametrize("label, os_name, reason, message", [
    ("windows", None, "PodOSSelectorNodeLabelDoesNotMatch",
     "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"),
    (None, "windows", "PodOSNotSupported",
     "Failed to admit pod as the OS field doesn't match node OS"),
])
def test_a_pod_for_another_os_is_refused_before_its_resources_count(
        stand_in, apiserver, cluster, namespace, label, os_name, reason, message) -> None:
    node = f"{namespace}-linux"
    cluster.add_node(node, gpus=1, labels={"kubernetes.io/os": "windows"})  # kubelet: linux
    manifest = pod(namespace, "foreign", "none", "q", gpus=2)  # short of GPUs as well
    if label:
        manifest["metadata"]["labels"]["kubernetes.io/os"] = label
    if os_name:
        manifest["spec"]["os"] = {"name": os_name}
    apiserver.create(manifest)
    cluster.bind("foreign", node)
    stand_in.step_now()
    status = phase(cluster, "foreign")
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", reason, f"Pod was rejected: {message}")
    cluster.delete_node(node)


def test_pods_of_every_namespace_count_on_the_node(stand_in, apiserver, cluster,
                                                   namespace) -> None:
    node = f"{namespace}-shared"
    cluster.add_node(node, gpus=2)
    neighbour = f"{namespace}-neighbour"
    apiserver.namespace(neighbour)
    apiserver.create(pod(neighbour, "theirs", "none", "q", gpus=2))
    apiserver.request("POST", f"/api/v1/namespaces/{neighbour}/pods/theirs/binding", {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "theirs", "namespace": neighbour},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    Kubelet(apiserver, neighbour).step_now()  # the neighbour's pod runs on the node
    place(apiserver, cluster, namespace, "ours", node, gpus=1)
    stand_in.step_now()
    status = phase(cluster, "ours")
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", "OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: "
        "nvidia.com/gpu, requested: 1, used: 2, capacity: 2")
    cluster.delete_node(node)
