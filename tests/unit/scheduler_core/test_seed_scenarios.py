"""Every PodGroup example of seeds 000, 001 and 003, scheduled by one cycle.

Pods ask for 1 GPU each and nodes have 8 GPUs unless a test says otherwise. Where seed 001
uses `minMember` at the root or a mid-level beside children, the decided design (seed 000)
applies: it counts descendant pods and ALL children are required.
"""

from scheduler.core.cycle import run_cycle
from scheduler.core.model import Node
from tests.unit.scheduler_core.builders import (
    bound_pods_of,
    flat_queues,
    gang,
    leaf,
    mid,
    nodes,
    pods,
    snapshot,
    topology,
)

QUEUES = flat_queues("team")


def prefill_service(min_subgroup=3, **fields):
    subgroups = [leaf(f"prefill-{i}", 8) for i in range(4)]
    pod_list = [p for i in range(4) for p in pods(f"prefill-{i}", 8, subgroup=f"prefill-{i}")]
    return gang("inference-service", subgroups=subgroups, pod_list=pod_list,
                min_subgroup=min_subgroup, **fields)


def replicas_bound(result, prefix="prefill"):
    bound = bound_pods_of(result, "inference-service")
    return sorted({name.rsplit("-", 1)[0] for name in bound if name.startswith(prefix)})


def test_seed_000_room_for_three_replicas_binds_three():
    result = run_cycle(snapshot(nodes(3), QUEUES, [prefill_service()]))
    assert len(result.bindings) == 24
    assert replicas_bound(result) == ["prefill-0", "prefill-1", "prefill-2"]
    assert result.explanations == ()


def test_seed_000_room_for_two_replicas_binds_nothing():
    result = run_cycle(snapshot(nodes(2), QUEUES, [prefill_service()]))
    assert result.bindings == ()
    codes = [reason.code for reason in result.explanation("inference-service")]
    assert codes == ["insufficient_gpus"]


def test_seed_000_partial_fourth_replica_is_not_bound():
    result = run_cycle(snapshot(nodes(3, gpus=10), QUEUES, [prefill_service()]))
    assert len(result.bindings) == 24


def test_seed_000_room_for_four_grows_elastically():
    result = run_cycle(snapshot(nodes(4), QUEUES, [prefill_service()]))
    assert len(result.bindings) == 32


def test_seed_000_without_min_subgroup_needs_all_four():
    result = run_cycle(snapshot(nodes(3), QUEUES, [prefill_service(min_subgroup=None)]))
    assert result.bindings == ()


def training_job():
    subgroups = [mid("decode", 2), leaf("decode-leaders", 1, "decode"),
                 leaf("decode-workers", 4, "decode"), mid("prefill", 2),
                 leaf("prefill-leaders", 1, "prefill"), leaf("prefill-workers", 4, "prefill")]
    pod_list = (pods("dl", 1, subgroup="decode-leaders") + pods("dw", 4, subgroup="decode-workers")
                + pods("pl", 1, subgroup="prefill-leaders")
                + pods("pw", 4, subgroup="prefill-workers"))
    return gang("training-job", subgroups=subgroups, pod_list=pod_list, min_subgroup=2)


def test_seed_000_two_level_binds_all_ten_or_nothing():
    assert len(run_cycle(snapshot(nodes(1, gpus=10), QUEUES, [training_job()])).bindings) == 10
    assert run_cycle(snapshot(nodes(1, gpus=9), QUEUES, [training_job()])).bindings == ()


def lws(groups=4, min_subgroup=3, **fields):
    subgroups, pod_list = [], []
    for i in range(groups):
        subgroups += [mid(f"group-{i}", 2), leaf(f"group-{i}-leader", 1, f"group-{i}"),
                      leaf(f"group-{i}-workers", 5, f"group-{i}")]
        pod_list += pods(f"g{i}-leader", 1, subgroup=f"group-{i}-leader")
        pod_list += pods(f"g{i}-worker", 5, subgroup=f"group-{i}-workers")
    return gang("lws-training", subgroups=subgroups, pod_list=pod_list,
                min_subgroup=min_subgroup, **fields)


def test_seed_003_lws_three_of_four_groups():
    assert len(run_cycle(snapshot(nodes(1, gpus=18), QUEUES, [lws()])).bindings) == 18
    assert run_cycle(snapshot(nodes(1, gpus=17), QUEUES, [lws()])).bindings == ()
    assert len(run_cycle(snapshot(nodes(1, gpus=24), QUEUES, [lws()])).bindings) == 24


def test_seed_003_lws_option_2_form_with_both_fields_still_schedules():
    """Seed 003 Option 2 sets minMember 18 beside minSubGroup 3 (000 forbids it; the core
    still honours both rules if such a gang reaches it)."""
    result = run_cycle(snapshot(nodes(1, gpus=18), QUEUES, [lws(min_member=18)]))
    assert len(result.bindings) == 18


def grove(zone_levels=True):
    zone = "zone" if zone_levels else None
    rack = "rack" if zone_levels else None
    subgroups = [mid("prefill", 3, required=zone)]
    subgroups += [leaf(f"prefill-{i}", 8, "prefill", required=rack) for i in range(4)]
    subgroups += [mid("decode", 1, required=zone)]
    subgroups += [leaf(f"decode-{i}", 4, "decode", required=rack) for i in range(2)]
    pod_list = [p for i in range(4) for p in pods(f"prefill-{i}", 8, subgroup=f"prefill-{i}")]
    pod_list += [p for i in range(2) for p in pods(f"decode-{i}", 4, subgroup=f"decode-{i}")]
    return gang("dynamo-inference", subgroups=subgroups, pod_list=pod_list, min_subgroup=2,
                semi_preemptible=True)


def zoned_nodes(zones=2, racks=2, per_rack=1, gpus=8):
    result = []
    for z in range(zones):
        for r in range(racks):
            for n in range(per_rack):
                result.append(Node(f"z{z}-r{r}-n{n}", gpus=gpus,
                                   labels={"zone": f"z{z}", "rack": f"r{r}"}))
    return result


def rack_of(node_name):
    return node_name.rsplit("-", 1)[0]


def test_seed_003_grove_with_zone_and_rack_constraints():
    cluster = zoned_nodes(zones=2, racks=4, per_rack=1)
    result = run_cycle(snapshot(cluster, QUEUES, [grove()], levels=topology("zone", "rack")))
    bound = bound_pods_of(result, "dynamo-inference")
    # the minimum (28), then decode-1 elastically; bin-packing puts decode in the prefill
    # zone's last rack, so zone z1 stays empty and prefill-3 has no rack left in z0
    assert len(bound) == 28 + 4
    assert {node.split("-")[0] for node in bound.values()} == {"z0"}
    for replica in ("prefill-0", "prefill-1", "prefill-2", "prefill-3", "decode-0", "decode-1"):
        replica_racks = {rack_of(node) for pod, node in bound.items()
                         if pod.startswith(replica + "-")}
        assert len(replica_racks) <= 1
    prefill_zones = {node.split("-")[0] for pod, node in bound.items() if pod.startswith("prefill")}
    assert len(prefill_zones) == 1
    prefill_status = result.queue("team").figures("gpu")
    assert prefill_status.allocated == 32
    assert prefill_status.allocated_non_preemptible == 28


def test_seed_003_grove_elastic_prefill_stays_in_the_prefill_zone():
    cluster = zoned_nodes(zones=2, racks=3, per_rack=1)
    result = run_cycle(snapshot(cluster, QUEUES, [grove()], levels=topology("zone", "rack")))
    bound = bound_pods_of(result, "dynamo-inference")
    assert len(bound) == 24 + 8  # prefill-3 has no rack left in the prefill zone
    assert not any(pod.startswith("prefill-3") for pod in bound)


def test_seed_003_grove_without_room_for_three_prefills_in_a_zone_binds_nothing():
    cluster = zoned_nodes(zones=2, racks=2, per_rack=1)
    result = run_cycle(snapshot(cluster, QUEUES, [grove()], levels=topology("zone", "rack")))
    assert result.bindings == ()
    assert "topology_no_domain" in [r.code for r in result.explanation("dynamo-inference")]


def test_seed_003_generic_disaggregated_inference():
    subgroups = [mid("prefill", 2), leaf("prefill-0", 3, "prefill"),
                 leaf("prefill-1", 3, "prefill"), mid("decode", 1), leaf("decode-0", 4, "decode")]
    pod_list = (pods("p0", 3, subgroup="prefill-0") + pods("p1", 3, subgroup="prefill-1")
                + pods("d0", 4, subgroup="decode-0"))
    job = gang("disagg", subgroups=subgroups, pod_list=pod_list, min_subgroup=2)
    assert len(run_cycle(snapshot(nodes(1, gpus=10), QUEUES, [job])).bindings) == 10
    assert run_cycle(snapshot(nodes(1, gpus=9), QUEUES, [job])).bindings == ()


def test_seed_003_leader_plus_two_of_three_worker_groups():
    subgroups = [leaf("leader", 1)] + [leaf(f"workers-{i}", 4) for i in range(3)]
    pod_list = pods("leader", 1, subgroup="leader") + tuple(
        p for i in range(3) for p in pods(f"w{i}", 4, subgroup=f"workers-{i}"))
    job = gang("leader-workers", subgroups=subgroups, pod_list=pod_list, min_subgroup=3)
    result = run_cycle(snapshot(nodes(1, gpus=9), QUEUES, [job]))
    assert sorted(bound_pods_of(result, "leader-workers")) == sorted(
        ["leader-0"] + [f"w{i}-{j}" for i in range(2) for j in range(4)])
    assert run_cycle(snapshot(nodes(1, gpus=8), QUEUES, [job])).bindings == ()


def test_seed_001_example_1_decode_and_prefill_each_in_one_rack():
    subgroups = [leaf("decode", 4, required="rack"), leaf("prefill", 1, required="rack")]
    pod_list = pods("decode", 4, subgroup="decode") + pods("prefill", 1, subgroup="prefill")
    job = gang("ex1", subgroups=subgroups, min_member=2, pod_list=pod_list)
    cluster = [Node(f"r{r}-n{n}", gpus=2, labels={"rack": f"r{r}"})
               for r in range(3) for n in range(2)]
    result = run_cycle(snapshot(cluster, QUEUES, [job], levels=topology("rack")))
    bound = bound_pods_of(result, "ex1")
    assert len(bound) == 5
    assert len({rack_of(bound[f"decode-{i}"]) for i in range(4)}) == 1
    small = [Node(f"r{r}-n0", gpus=3, labels={"rack": f"r{r}"}) for r in range(3)]
    result = run_cycle(snapshot(small, QUEUES, [job], levels=topology("rack")))
    assert result.bindings == ()
    assert [r.code for r in result.explanation("ex1")] == ["topology_no_domain"]


def test_seed_001_example_2_blocks_and_racks():
    subgroups = [mid("decode", min_member=2, required="block"),
                 leaf("decode-workers", 4, "decode", required="rack"),
                 leaf("decode-leaders", 1, "decode", required="rack"),
                 mid("prefill", min_member=2, required="block"),
                 leaf("prefill-workers", 4, "prefill", required="rack"),
                 leaf("prefill-leaders", 1, "prefill", required="rack")]
    pod_list = (pods("dw", 4, subgroup="decode-workers") + pods("dl", 1, subgroup="decode-leaders")
                + pods("pw", 4, subgroup="prefill-workers")
                + pods("pl", 1, subgroup="prefill-leaders"))
    job = gang("ex2", subgroups=subgroups, pod_list=pod_list, min_member=2)
    cluster = [Node(f"b{b}-r{r}", gpus=4, labels={"block": f"b{b}", "rack": f"b{b}r{r}"})
               for b in range(2) for r in range(2)]
    result = run_cycle(snapshot(cluster, QUEUES, [job], levels=topology("block", "rack")))
    bound = bound_pods_of(result, "ex2")
    assert len(bound) == 10
    for prefix in ("d", "p"):
        assert len({bound[pod].split("-")[0] for pod in bound if pod.startswith(prefix)}) == 1
    assert len({bound[f"dw-{i}"] for i in range(4)}) == 1


def test_seed_001_example_3_replicas_all_required_under_decided_semantics():
    subgroups = [leaf(f"replica-{i}", 3) for i in range(1, 4)]
    pod_list = [p for i in range(1, 4) for p in pods(f"r{i}", 3, subgroup=f"replica-{i}")]
    job = gang("ex3", subgroups=subgroups, pod_list=pod_list, min_member=2)
    assert len(run_cycle(snapshot(nodes(1, gpus=9), QUEUES, [job])).bindings) == 9
    assert run_cycle(snapshot(nodes(1, gpus=6), QUEUES, [job])).bindings == ()


def test_seed_001_example_4_replica_sets_of_leaders_and_workers():
    subgroups = []
    pod_list = []
    for i in (1, 2):
        subgroups += [mid(f"replica-{i}", min_member=2), leaf(f"leaders-{i}", 1, f"replica-{i}"),
                      leaf(f"workers-{i}", 3, f"replica-{i}")]
        pod_list += pods(f"l{i}", 1, subgroup=f"leaders-{i}")
        pod_list += pods(f"w{i}", 3, subgroup=f"workers-{i}")
    job = gang("ex4", subgroups=subgroups, pod_list=pod_list, min_member=1)
    assert len(run_cycle(snapshot(nodes(1, gpus=8), QUEUES, [job])).bindings) == 8
    assert run_cycle(snapshot(nodes(1, gpus=7), QUEUES, [job])).bindings == ()
    elastic = gang("ex4", subgroups=subgroups, pod_list=pod_list, min_subgroup=1)
    assert len(run_cycle(snapshot(nodes(1, gpus=7), QUEUES, [elastic])).bindings) == 4
