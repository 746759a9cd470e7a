"""PodGroup/Pod builder and CRD schema validation."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.podgroup_validation import validate_podgroup
from scheduler.kai import crd_validation
from scheduler.kai.crd_validation import load_crd_schemas, validate_manifest
from scheduler.kai.podgroups import (
    build_group_manifests,
    build_workflow_manifests,
    dns_label,
    label_value,
    pod_name,
    podgroup_name,
    priority_class,
)
from tests.shared_data import example_paths, kai_crds, osmo_examples
from workflows.spec import parse_workflow_spec

REPO = Path(__file__).resolve().parents[3]
PLATFORMS = {
    "ovx-l40": {"description": "L40", "node_selector": {"nvidia.com/gpu.product": "L40"}},
    "dgx-h100": {"description": "H100", "node_selector": {"nvidia.com/gpu.product": "H100",
                                                          "osmo/pool": "dgx"}},
}


def test_dns_label_is_unchanged_when_valid_and_hashed_otherwise() -> None:
    assert dns_label("hello-osmo-1-hello-group") == "hello-osmo-1-hello-group"
    assert dns_label("Task_A") == "task-a-" + hashlib.sha256(b"Task_A").hexdigest()[:8]
    assert dns_label("task-a") == "task-a"
    long_name = "w" * 40 + "-" + "g" * 40
    shortened = dns_label(long_name)
    assert len(shortened) == 63
    digest = hashlib.sha256(long_name.encode()).hexdigest()[:8]
    assert shortened == "w" * 40 + "-" + "g" * 13 + "-" + digest
    assert shortened == dns_label(long_name)  # deterministic
    assert dns_label("___") == hashlib.sha256(b"___").hexdigest()[:8]
    assert label_value("osmo-pool-osmo-team.shared") == "osmo-pool-osmo-team.shared"
    assert len(label_value("x" * 80)) == 63


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=120))
def test_dns_label_always_valid(name: str) -> None:
    label = dns_label(name)
    assert 1 <= len(label) <= 63
    assert label == dns_label(label)  # a valid label is a fixed point
    value = label_value(name)
    assert len(value) <= 63 and label_value(value) == value


def test_priority_classes() -> None:
    assert priority_class("HIGH").name == "osmo-high"
    assert (priority_class("normal").value, priority_class("LOW").preemptibility) == (
        100, "preemptible")
    with pytest.raises(ValueError, match="HIGH, NORMAL or LOW"):
        priority_class("URGENT")


def test_train_yaml_manifests_exactly() -> None:
    text = (osmo_examples() / "train.yaml").read_text()
    text = text.replace("        localpath: train.py", "        contents: print('train')")
    workflow = parse_workflow_spec(text, set_variables=["storage_url=s3://bucket"])
    manifests = build_group_manifests(workflow.groups[0], workflow_name="train-multi-gpu-1",
                                      namespace="osmo", queue="osmo-pool-osmo-team.shared",
                                      priority="LOW", scheduler_name="kai-test")
    assert manifests.podgroup == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "train-multi-gpu-1-training",
            "namespace": "osmo",
            "labels": {"osmo.workflow": "train-multi-gpu-1", "osmo.group": "training",
                       "kai.scheduler/queue": "osmo-pool-osmo-team.shared"},
            "annotations": {"osmo/workflow-name": "train-multi-gpu-1",
                            "osmo/group-name": "training"},
        },
        "spec": {"queue": "osmo-pool-osmo-team.shared", "priorityClassName": "osmo-low",
                 "preemptibility": "preemptible", "minMember": 2},
    }
    master = manifests.pods[0]
    assert master == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-multi-gpu-1-training-master",
            "namespace": "osmo",
            "labels": {"kai.scheduler/queue": "osmo-pool-osmo-team.shared",
                       "kai.scheduler/subgroup-name": "default",
                       "osmo.workflow": "train-multi-gpu-1", "osmo.group": "training",
                       "osmo.task": "master"},
            "annotations": {"pod-group-name": "train-multi-gpu-1-training",
                            "kai.scheduler/skip-podgrouper": "true",
                            "osmo/workflow-name": "train-multi-gpu-1",
                            "osmo/group-name": "training", "osmo/task-name": "master"},
        },
        "spec": {
            "schedulerName": "kai-test",
            "priorityClassName": "osmo-low",
            "restartPolicy": "Never",
            "containers": [{
                "name": "master",
                "image": "nvcr.io/nvidia/pytorch:24.03-py3",
                "command": ["bash"],
                "args": ["/tmp/master.sh"],
                "resources": {
                    "requests": {"cpu": "16", "memory": "30Gi", "ephemeral-storage": "30Gi",
                                 "nvidia.com/gpu": "8"},
                    "limits": {"nvidia.com/gpu": "8"},
                },
            }],
        },
    }
    assert [p["metadata"]["name"] for p in manifests.pods] == [
        "train-multi-gpu-1-training-master", "train-multi-gpu-1-training-worker"]
    assert manifests.all()[0] is manifests.podgroup
    assert validate_podgroup(manifests.podgroup, manifests.pods).allowed
    assert validate_manifest(manifests.podgroup, crds_dir=kai_crds()) == []


def test_platform_node_selector_replicas_env_and_names() -> None:
    spec = """
workflow:
  name: Platform_Demo
  resources:
    default: {cpu: 500m, memory: 1536Mi, platform: ovx-l40}
    x86_gpu: {cpu: 4, gpu: 2, memory: 16Gi, platform: dgx-h100}
  groups:
  - name: Mixed_Group
    tasks:
    - {name: cpu-task, image: ubuntu, lead: true, environment: {A: 1, B: x}}
    - {name: gpu_task, image: pytorch, resource: x86_gpu, replicas: 3}
"""
    workflow = parse_workflow_spec(spec, platforms=PLATFORMS)
    manifests = build_workflow_manifests(workflow, workflow_name="Platform_Demo-7",
                                         namespace="team", queue="q", priority="HIGH",
                                         platforms=PLATFORMS, labels={"osmo.pool": "team"})[0]
    pg_name = podgroup_name("Platform_Demo-7", "Mixed_Group")
    assert pg_name == dns_label("Platform_Demo-7-Mixed_Group")
    assert manifests.podgroup["metadata"]["name"] == pg_name
    assert manifests.podgroup["metadata"]["labels"]["osmo.pool"] == "team"
    assert manifests.podgroup["spec"]["minMember"] == 4
    pods = manifests.pods
    assert [p["metadata"]["name"] for p in pods] == [
        pod_name(pg_name, "cpu-task"), *(pod_name(pg_name, "gpu_task", i) for i in range(3))]
    assert pods[0]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "L40"}
    assert pods[1]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "H100",
                                               "osmo/pool": "dgx"}
    assert pods[0]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"},
                                                       {"name": "B", "value": "x"}]
    assert pods[0]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1536Mi"}}
    assert pods[3]["metadata"]["annotations"]["osmo/replica-index"] == "2"
    assert pods[3]["spec"]["containers"][0]["name"] == dns_label("gpu_task")
    assert pods[1]["spec"]["containers"] is not pods[2]["spec"]["containers"]
    assert all(p["metadata"]["labels"]["osmo.pool"] == "team" for p in pods)
    assert validate_podgroup(manifests.podgroup, pods).allowed
    with pytest.raises(ValueError, match="platform 'ovx-l40', which the pool does not define"):
        build_group_manifests(workflow.groups[0], workflow_name="w", namespace="n", queue="q",
                              platforms={"dgx-h100": PLATFORMS["dgx-h100"]})


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.name)
@pytest.mark.parametrize("priority", ["HIGH", "NORMAL", "LOW"])
def test_every_example_builds_valid_manifests(path: Path, priority: str) -> None:
    text = path.read_text().replace("        localpath: train.py", "        contents: x")
    workflow = parse_workflow_spec(text, platforms=PLATFORMS)
    for manifests in build_workflow_manifests(workflow, workflow_name=f"{workflow.name}-1",
                                              namespace="osmo", queue="q", priority=priority,
                                              platforms=PLATFORMS):
        assert validate_manifest(manifests.podgroup, crds_dir=kai_crds()) == []
        assert validate_podgroup(manifests.podgroup, manifests.pods).as_dict()["allowed"]


# ---- CRD validation -----------------------------------------------------------------------

def test_loads_current_crds_only() -> None:
    schemas = load_crd_schemas(kai_crds())
    assert set(schemas) == {
        ("scheduling.run.ai/v2alpha2", "PodGroup"), ("scheduling.run.ai/v2", "Queue"),
        ("kai.scheduler/v1alpha1", "Topology"), ("scheduling.run.ai/v1alpha2", "BindRequest"),
        ("kai.scheduler/v1", "SchedulingShard"),
    }
    assert "minSubGroup" in schemas[("scheduling.run.ai/v2alpha2", "PodGroup")][
        "properties"]["spec"]["properties"]


def test_crd_dir_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(crd_validation.ENV_VAR, str(kai_crds()))
    assert validate_manifest({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                              "metadata": {"name": "x"}, "spec": {"minMember": 1}}) == []
    monkeypatch.delenv(crd_validation.ENV_VAR)
    with pytest.raises(FileNotFoundError, match="OSMO_KAI_CRDS_DIR"):
        load_crd_schemas()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_crd_schemas(kai_crds() / "missing")


def test_crd_errors() -> None:
    manifest = {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {},
        "spec": {"minMember": -1, "minSubGroup": 2**31, "queue": 3,
                 "subGroups": [{"name": "Bad", "minMember": "2", "extra": True}, {}]},
        "status": {"resourcesStatus": {"allocated": {"cpu": 1.5, "gpu": "2", "memory": []}}},
    }
    assert validate_manifest(manifest, crds_dir=kai_crds()) == [
        "metadata.name: required",
        "spec.minMember: -1 is less than the minimum of 0",
        "spec.minSubGroup: 2147483648 is not a 'int32'",
        "spec.queue: 3 is not of type 'string'",
        "spec.subGroups[0].minMember: '2' is not of type 'integer'",
        "spec.subGroups[0].name: 'Bad' does not match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
        "spec.subGroups[1]: 'name' is a required property",
        "status.resourcesStatus.allocated.cpu: 1.5 is not valid under any of the given schemas",
        "status.resourcesStatus.allocated.memory: [] is not valid under any of the given schemas",
        'spec.subGroups[0].extra: unknown field "extra" (the API server would drop it)',
    ]
    relaxed = validate_manifest(manifest, crds_dir=kai_crds(), strict=False)
    assert not any("unknown field" in message for message in relaxed)
    assert validate_manifest({"apiVersion": "v1", "kind": "Pod"}, crds_dir=kai_crds()) == [
        "no CRD schema for apiVersion 'v1', kind 'Pod'"]
    assert validate_manifest([], crds_dir=kai_crds()) == ["manifest must be an object"]


def test_queue_and_topology_manifests() -> None:
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
             "metadata": {"name": "osmo-pool-osmo-team"},
             "spec": {"parentQueue": "osmo-default-osmo", "priority": 100, "resources": {
                 "gpu": {"quota": 10, "limit": -1, "overQuotaWeight": 1},
                 "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                 "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}}
    assert validate_manifest(queue, crds_dir=kai_crds()) == []
    topology = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
                "metadata": {"name": "osmo-topology"},
                "spec": {"levels": [{"alias": "zone", "nodeLabel": "topology.osmo/zone"},
                                    {"alias": "hostname",
                                     "nodeLabel": "kubernetes.io/hostname"}]}}
    assert validate_manifest(topology, crds_dir=kai_crds()) == []
    topology["spec"]["levels"] = []
    assert validate_manifest(topology, crds_dir=kai_crds()) == [
        "spec.levels: [] should be non-empty"]


RACK_GANG = """
workflow:
  name: ranks
  groups:
  - name: g
    scheduling:
      topologyConstraint: {requiredTopologyLevel: rack, preferredTopologyLevel: hostname}
      subGroups:
      - {name: a, minMember: 1, topologyConstraint: {requiredTopologyLevel: hostname}}
    tasks:
    - {name: w, image: nvcr.io/x:1, command: [train], resource: r, subGroup: a, lead: true}
  resources:
    r: {gpu: 8}
"""


def test_constraints_on_the_cluster_topology_are_emitted_as_kai_reads_them() -> None:
    """KAI v0.17 drops a constraint that names no Topology and matches levels by node label."""
    from scheduler.models import DEFAULT_TOPOLOGY_LEVELS

    group = parse_workflow_spec(RACK_GANG).groups[0]
    manifests = build_group_manifests(group, workflow_name="ranks-1", namespace="osmo",
                                      queue="q", topology=DEFAULT_TOPOLOGY_LEVELS)
    spec = manifests.podgroup["spec"]
    assert spec["topologyConstraint"] == {"preferredTopologyLevel": "kubernetes.io/hostname",
                                          "requiredTopologyLevel": "topology.osmo/rack",
                                          "topology": "osmo-topology"}
    assert spec["subGroups"][0]["topologyConstraint"] == {
        "requiredTopologyLevel": "kubernetes.io/hostname", "topology": "osmo-topology"}
    assert validate_manifest(manifests.podgroup, crds_dir=kai_crds()) == []
    assert validate_podgroup(manifests.podgroup).errors == ()
