"""The one decoder of KAI and Kubernetes objects into core types (``scheduler.core.decode``),
read by both snapshot builders: a workflow group's stored gang fields (the embedded loop) and a
PodGroup with its pods (the Kubernetes backend) become the same Gang; a constraint that names
no level constrains nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.core import (
    Gang,
    Node,
    Pod,
    Queue,
    Snapshot,
    SubGroup,
    Topology,
    TopologyConstraint,
    TopologyLevel,
    run_cycle,
)
from scheduler.core.decode import (
    QuantityError,
    Requests,
    constraint_of,
    gang_of,
    node_allocatable,
    pod_of,
    pod_requests,
    podgroup_gang,
    podgroup_queue,
    topology_levels,
    topology_of,
)

ROOT = Path(__file__).resolve().parents[2]

# A group's gang fields as admission stores them (WorkflowGroup.gang) and as a PodGroup's spec
# carries them: the same KAI fields.
FIELDS = {
    "minSubGroup": 1,
    "topologyConstraint": {"requiredTopologyLevel": "zone", "topology": "osmo-topology"},
    "subGroups": [
        {"name": "prefill", "minSubGroup": 1,
         "topologyConstraint": {"preferredTopologyLevel": "rack"}},
        {"name": "prefill-0", "parent": "prefill", "minMember": 2},
    ],
}
SUBGROUPS = (
    SubGroup("prefill", min_subgroup=1, topology=TopologyConstraint(preferred_level="rack")),
    SubGroup("prefill-0", parent="prefill", min_member=2),
)


def podgroup(spec=None, **metadata) -> dict:
    return {"metadata": {"name": "pg", "namespace": "osmo",
                         "creationTimestamp": "2025-01-01T00:00:10Z", **metadata},
            "spec": spec or {}}


def test_the_decoder_is_pure() -> None:
    """Importing it loads no framework: the embedded loop, tools and the core may use it."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, scheduler.core.decode; print(sorted({m.split('.')[0] "
         "for m in sys.modules} & {'django', 'rest_framework', 'celery', 'kubernetes'}))"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


@pytest.mark.parametrize("raw, expected", [
    (None, None),
    ({}, None),
    ({"topology": "osmo-topology"}, None),  # names a Topology, no level: constrains nothing
    ({"requiredTopologyLevel": "", "preferredTopologyLevel": ""}, None),
    ({"requiredTopologyLevel": "rack"}, TopologyConstraint(required_level="rack")),
    ({"preferredTopologyLevel": "rack", "requiredTopologyLevel": "",
      "topology": "osmo-topology"}, TopologyConstraint(preferred_level="rack")),
])
def test_a_constraint_is_its_levels(raw, expected) -> None:
    assert constraint_of(raw) == expected


def test_stored_gang_fields_become_the_gang_the_embedded_loop_schedules() -> None:
    pods = (Pod("w/t0", subgroup="prefill-0", gpus=1), Pod("w/t1", subgroup="prefill-0"))
    gang = gang_of("w-g", FIELDS, pods, queue="q", priority=100, created_at=3.0,
                   running_since=None, staleness_grace_seconds=-1)
    assert gang == Gang(name="w-g", queue="q", priority=100, created_at=3.0, min_subgroup=1,
                        subgroups=SUBGROUPS,
                        topology=TopologyConstraint(required_level="zone"), pods=pods,
                        staleness_grace_seconds=-1)
    assert gang_of("w-g", {}, pods) == Gang(name="w-g", queue="", pods=pods)


def test_a_podgroup_becomes_the_same_gang_as_kai_reads_it() -> None:
    pods = (Pod("osmo/p-0", subgroup="prefill-0", gpus=1),)
    gang = podgroup_gang("osmo/pg", podgroup(FIELDS), pods, queue="q", priority=None,
                         running_since=5.0, below_min_since=None)
    stored = gang_of("osmo/pg", FIELDS, pods, queue="q")
    assert (gang.min_member, gang.min_subgroup, gang.subgroups, gang.topology) == (
        stored.min_member, stored.min_subgroup, stored.subgroups, stored.topology)
    assert (gang.priority, gang.preemptible, gang.semi_preemptible) == (50, True, False)
    assert (gang.created_at, gang.running_since) == (1735689610.0, 5.0)
    assert (gang.exec_timeout, gang.workload) == (None, None)
    ours = podgroup(FIELDS, annotations={"osmo/workflow-name": "train-1",
                                         "osmo/exec-timeout": "3600"})
    gang = podgroup_gang("osmo/pg", ours, pods, queue="q", priority=100)
    assert (gang.exec_timeout, gang.workload) == (3600.0, "workflow 'train-1'")


@pytest.mark.parametrize("preemptibility, priority, preemptible, semi", [
    (None, 99, True, False),  # KAI: below 100 is preemptible unless the PodGroup says
    (None, 100, False, False),
    ("preemptible", 125, True, False),
    ("non-preemptible", 50, False, False),
    ("semi-preemptible", 50, False, True),
])
def test_kai_s_preemptibility_rule(preemptibility, priority, preemptible, semi) -> None:
    spec = {"preemptibility": preemptibility} if preemptibility else {}
    gang = podgroup_gang("osmo/pg", podgroup(spec), (), queue="q", priority=priority)
    assert (gang.priority, gang.preemptible, gang.semi_preemptible) == (priority, preemptible,
                                                                        semi)


def test_fields_of_the_wrong_type_read_as_unset() -> None:
    """Anyone may create a PodGroup: a number as a string is no number, an empty parent is
    the root."""
    gang = gang_of("g", {"minMember": "2", "subGroups": [
        {"name": "a", "parent": "", "minMember": "1"}]}, ())
    assert gang.min_member is None
    assert gang.subgroups == (SubGroup("a"),)


def test_the_queue_is_the_spec_s_else_kai_s_label() -> None:
    assert podgroup_queue(podgroup({"queue": "a"}, labels={"kai.scheduler/queue": "b"})) == "a"
    assert podgroup_queue(podgroup({}, labels={"kai.scheduler/queue": "b"})) == "b"
    assert podgroup_queue(podgroup({})) == ""


def test_pods_nodes_and_topologies() -> None:
    pod = {"metadata": {"name": "p", "uid": "decode-p",
                        "labels": {"kai.scheduler/subgroup-name": "s"}},
           "spec": {"nodeSelector": {"a": "b"}, "containers": [
               {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                              "limits": {"nvidia.com/gpu": "2"}}}]}}
    assert pod_of("osmo/p", pod, "n1", subgroups=True) == Pod(
        "osmo/p", subgroup="s", gpus=2, cpu=500, memory=2**30, node_selector={"a": "b"},
        node="n1")
    assert pod_of("osmo/p", pod, None, subgroups=False).subgroup is None
    assert node_allocatable({"status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "64",
                                                     "memory": "1Ki"}}}) == (8, 64000, 1024)
    assert node_allocatable({"status": {"allocatable": {"nvidia.com/gpu": "x"}}}) == (0, 0, 0)
    levels = [{"nodeLabel": "topology.osmo/rack", "alias": "rack"},
              {"nodeLabel": "kubernetes.io/hostname"}]
    assert topology_levels(levels) == (TopologyLevel("topology.osmo/rack", "rack"),
                                       TopologyLevel("kubernetes.io/hostname"))
    other = {"metadata": {"name": "other"}, "spec": {"levels": levels[1:]}}
    ours = {"metadata": {"name": "osmo-topology"}, "spec": {"levels": levels}}
    assert topology_of([other, ours]) == Topology("osmo-topology", topology_levels(levels))
    assert topology_of([other]).name == "other"
    assert [level.alias for level in topology_of([]).levels] == ["zone", "block", "rack",
                                                                "hostname"]


def test_a_bad_quantity_is_an_error_when_strict_and_nothing_when_read_from_the_cluster():
    pod = {"metadata": {"name": "p"}, "spec": {
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "８"}}}]}}
    assert pod_requests(pod) == Requests(gpus=0, cpu=1000, memory=2**30)
    with pytest.raises(QuantityError) as caught:
        pod_requests(pod, strict=True)
    assert caught.value.field == "spec.initContainers[0].resources.limits.nvidia.com/gpu"
    assert caught.value.detail == "nvidia.com/gpu must be a whole number, got '８'"


@pytest.mark.parametrize("raw, moved", [({"topology": "osmo-topology"}, True),
                                        ({"requiredTopologyLevel": "hostname"}, False)])
def test_only_a_constraint_with_a_level_keeps_a_gang_from_being_consolidated(raw, moved):
    """Two 2-GPU nodes each run a preemptible 1-GPU gang; a 2-GPU gang waits. A running gang
    that names only a Topology is moved to make room, as one without a constraint; one that
    requires a level stays."""
    nodes = (Node("n0", gpus=2, labels={"kubernetes.io/hostname": "n0"}),
             Node("n1", gpus=2, labels={"kubernetes.io/hostname": "n1"}))
    running = [gang_of(f"r{i}", {"topologyConstraint": raw}, (Pod(f"r{i}-0", gpus=1,
                                                                  node=f"n{i}"),),
                       queue="team", priority=50, preemptible=True, running_since=0.0)
               for i in range(2)]
    waiting = gang_of("wide", {}, (Pod("wide-0", gpus=2),), queue="team", priority=50,
                      preemptible=True, created_at=10.0)
    result = run_cycle(Snapshot(nodes=nodes, queues=(Queue("root"), Queue("team", "root")),
                                gangs=(*running, waiting),
                                topology=Topology(levels=topology_levels(
                                    [{"nodeLabel": "kubernetes.io/hostname",
                                      "alias": "hostname"}])),
                                now=20.0))
    assert (len(result.moves), [b.pod for b in result.bindings]) == (
        (1, ["wide-0"]) if moved else (0, []))
