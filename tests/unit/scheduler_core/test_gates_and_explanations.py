"""Capacity gates on every queue level, and the reasons given for pending gangs."""

from scheduler.core.cycle import run_cycle
from scheduler.core.model import Node, Pod, SubGroup, TopologyConstraint
from scheduler.core.results import Reason
from tests.unit.scheduler_core.builders import (
    flat_queues,
    gang,
    leaf,
    nodes,
    pods,
    queue,
    snapshot,
    topology,
)


def test_parent_limit_blocks_second_gang_and_names_the_parent():
    queues = [queue("pool", limit=16), queue("a", "pool", quota=8), queue("b", "pool", quota=8)]
    gangs = [gang("first", "a", pods("f", 2, gpus=8), min_member=2, created_at=1, preemptible=True),
             gang("second", "b", pods("s", 1, gpus=8), created_at=2, preemptible=True)]
    result = run_cycle(snapshot(nodes(4), queues, gangs))
    # Queue order judges each queue with its next gang: b stays within its deserved 8 GPUs,
    # a would pass it, so b goes first and a's 16-GPU gang meets the pool's limit.
    assert {b.gang for b in result.bindings} == {"second"}
    (reason,) = result.explanation("first")
    assert reason.code == "queue_over_limit"
    assert reason.queue == "pool"
    assert "above its limit of 16 GPUs" in reason.message


def test_non_preemptible_work_never_exceeds_quota_but_preemptible_borrows():
    queues = flat_queues("team", quota=8)
    normal = gang("normal", "team", pods("n", 2, gpus=8), min_member=2)
    result = run_cycle(snapshot(nodes(4), queues, [normal]))
    assert result.bindings == ()
    (reason,) = result.explanation("normal")
    assert reason.code == "queue_over_quota"
    assert reason.queue == "team"
    assert "16 GPUs, above its quota of 8 GPUs" in reason.message
    low = gang("low", "team", pods("n", 2, gpus=8), min_member=2, preemptible=True, priority=50)
    result = run_cycle(snapshot(nodes(4), queues, [low]))
    assert len(result.bindings) == 2
    figures = result.queue("team").figures("gpu")
    assert (figures.allocated, figures.allocated_non_preemptible) == (16, 0)


def test_ancestor_quota_caps_non_preemptible_work():
    queues = [queue("pool", quota=8), queue("a", "pool", quota=8), queue("b", "pool", quota=8)]
    gangs = [gang("ga", "a", pods("a", 1, gpus=8), created_at=1),
             gang("gb", "b", pods("b", 1, gpus=8), created_at=2)]
    result = run_cycle(snapshot(nodes(2), queues, gangs))
    assert len(result.bindings) == 1
    pending = "gb" if result.bindings[0].gang == "ga" else "ga"
    assert result.explanation(pending)[0].queue == "pool"


def test_insufficient_gpus_message_has_numbers():
    result = run_cycle(snapshot(nodes(1), flat_queues("team"), [gang("big", "team",
                                                                    pods("p", 3, gpus=4),
                                                                    min_member=3)]))
    (reason,) = result.explanation("big")
    assert reason.code == "insufficient_gpus"
    assert reason.message == ("gang 'big' needs at least 12 GPUs to start; the cluster has "
                              "8 GPUs free of 8 GPUs")


def test_fragmentation_is_explained_per_node():
    halves = [gang(f"half-{i}", "team", [Pod(f"h{i}", gpus=4, node=f"node-00{i}")])
              for i in range(2)]
    result = run_cycle(snapshot(nodes(2), flat_queues("team"),
                                halves + [gang("wide", "team", pods("p", 1, gpus=8))]))
    assert result.explanation("wide") == (Reason(
        "insufficient_gpus", "pods of gang 'wide' need 8 GPUs each, and no node has room for "
        "all of them (most free GPUs on one node: 4)"),)


def test_a_pod_larger_than_every_node_is_explained_by_that_alone():
    # 8-GPU nodes, team b's preemptible work at its deserved quota: reclaiming from b could
    # never place a 16-GPU pod, so the explanation does not offer it.
    queues = [queue("root"), queue("a", "root", quota=16), queue("b", "root", quota=16)]
    running = gang("b-job", "b", [Pod(f"b-{i}", gpus=8, node=f"node-00{i}") for i in range(2)],
                   min_member=2, preemptible=True, running_since=0)
    big = gang("big", "a", [Pod("big-0", gpus=16, cpu=4000)], created_at=5)
    cluster = [Node(f"node-00{i}", 8, cpu=32000) for i in range(4)]
    result = run_cycle(snapshot(cluster, queues, [running, big]))
    assert result.evictions == () and result.bindings == ()
    assert result.explanation("big") == (Reason(
        "insufficient_gpus", "pods of gang 'big' need 16 GPUs, 4 CPU cores each, and no node "
        "has 16 GPUs (the largest has 8 GPUs), so they cannot start on this cluster"),)


def test_a_gang_larger_than_the_cluster_is_explained_by_that_alone():
    # Over its quota too, but raising the quota would not place it either.
    job = gang("huge", "team", pods("p", 3, gpus=8), min_member=3)
    result = run_cycle(snapshot(nodes(2), flat_queues("team", quota=8), [job]))
    assert result.explanation("huge") == (Reason(
        "insufficient_gpus", "gang 'huge' needs at least 24 GPUs to start; the cluster has "
        "16 GPUs free of 16 GPUs", queue="team"),)


def test_an_oversized_pod_only_the_node_selector_allows_is_named_with_its_labels():
    cluster = [Node("small", 4, labels={"gpu-type": "h100"}), Node("big", 8)]
    job = gang("sel", "team", [Pod("p-0", gpus=8, node_selector={"gpu-type": "h100"})])
    result = run_cycle(snapshot(cluster, flat_queues("team"), [job]))
    assert result.explanation("sel") == (Reason(
        "insufficient_gpus", "pods of gang 'sel' need 8 GPUs each, and no node with the labels "
        "gpu-type=h100 has 8 GPUs (the largest has 4 GPUs), so they cannot start on this "
        "cluster"),)


def test_an_oversized_optional_subgroup_leaves_the_real_reason():
    # minSubGroup 1: the 4-GPU subgroup alone could run, so the quota is what keeps it out.
    job = gang("either", "team", pods("x", 1, gpus=16, subgroup="xl") + pods("s", 1, gpus=4,
                                                                              subgroup="s"),
               subgroups=[leaf("xl", 1), leaf("s", 1)], min_subgroup=1)
    result = run_cycle(snapshot(nodes(2), flat_queues("team", quota=2), [job]))
    assert [reason.code for reason in result.explanation("either")] == ["queue_over_quota"]


def test_node_selector_without_match():
    pod = Pod("p-0", gpus=1, node_selector={"gpu-type": "h100"})
    cluster = [Node("a", 8, labels={"gpu-type": "a100"})]
    result = run_cycle(snapshot(cluster, flat_queues("team"), [gang("sel", "team", [pod])]))
    assert [r.code for r in result.explanation("sel")] == ["node_selector_no_match"]
    matching = [Node("a", 8, labels={"gpu-type": "h100"})]
    assert len(run_cycle(snapshot(matching, flat_queues("team"),
                                  [gang("sel", "team", [pod])])).bindings) == 1


def test_unschedulable_nodes_are_not_used():
    cluster = [Node("cordoned", 8, schedulable=False), Node("open", 8)]
    result = run_cycle(snapshot(cluster, flat_queues("team"),
                                [gang("g", "team", pods("p", 2, gpus=8), min_member=1)]))
    assert [b.node for b in result.bindings] == ["open"]


def test_topology_no_domain_names_level_and_best_domain():
    cluster = [Node(f"r{r}-n{n}", 4, labels={"rack": f"r{r}"}) for r in range(2) for n in range(2)]
    job = gang("racked", "team", pods("p", 3, gpus=4), min_member=3,
               topology=TopologyConstraint(required_level="rack"))
    result = run_cycle(snapshot(cluster, flat_queues("team"), [job], levels=topology("rack")))
    (reason,) = result.explanation("racked")
    assert (reason.code, reason.level, reason.domain) == ("topology_no_domain", "rack", "r1")
    assert "needs 12 GPUs within one rack" in reason.message


def test_unknown_queue_invalid_tree_and_unknown_level_are_explained():
    bad_tree = gang("bad", "team", [Pod("p", subgroup="nope")],
                    subgroups=[SubGroup("a", min_member=1)])
    lost = gang("lost", "ghost", pods("p", 1))
    odd_level = gang("odd", "team", pods("q", 1, subgroup="a"),
                     subgroups=[leaf("a", 1, required="planet")])
    result = run_cycle(snapshot(nodes(1), flat_queues("team"), [bad_tree, lost, odd_level]))
    assert result.bindings == ()
    assert [r.code for r in result.explanation("bad")] == ["invalid_podgroup"]
    assert [r.code for r in result.explanation("lost")] == ["queue_not_found"]
    assert [r.code for r in result.explanation("odd")] == ["topology_unknown_level"]


def test_jobs_on_parent_queues_are_not_scheduled():
    result = run_cycle(snapshot(nodes(1), flat_queues("team"), [gang("g", "root", pods("p", 1))]))
    assert [r.code for r in result.explanation("g")] == ["queue_not_leaf"]


def test_queue_figures_are_reported_for_every_level():
    queues = [queue("pool", quota=16), queue("a", "pool", quota=8, weight=3),
              queue("b", "pool", quota=8)]
    gangs = [gang("ga", "a", pods("a", 4, gpus=2), min_member=4),
             gang("gb", "b", pods("b", 1, gpus=8), preemptible=True)]
    result = run_cycle(snapshot(nodes(4), queues, gangs))
    a = result.queue("a").figures("gpu")
    assert (a.deserved, a.fair_share, a.allocated, a.allocated_non_preemptible, a.requested) == (
        8, 8, 8, 8, 8)
    pool = result.queue("pool").figures("gpu")
    assert (pool.fair_share, pool.allocated, pool.allocated_non_preemptible, pool.requested) == (
        16, 16, 8, 16)
    assert result.to_dict()["queues"][0]["resources"]["gpu"]["allocated"] == 8
