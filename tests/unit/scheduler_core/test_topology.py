"""Topology domains, preferred levels, bin-pack versus spread."""

from scheduler.core.cycle import run_cycle
from scheduler.core.model import Node, TopologyConstraint
from tests.unit.scheduler_core.builders import (
    bound_nodes,
    flat_queues,
    gang,
    pods,
    snapshot,
    topology,
)

QUEUES = flat_queues("team")
RACKS = topology("rack")


def racked(per_rack=2, racks=2, gpus=8):
    return [Node(f"r{r}-n{n}", gpus, labels={"rack": f"r{r}"})
            for r in range(racks) for n in range(per_rack)]


def test_preferred_rack_keeps_the_gang_together_in_the_fullest_rack_that_fits():
    cluster = racked()
    busy = gang("busy", "team", pods("busy", 1, gpus=6, node="r1-n0"))
    job = gang("job", "team", pods("p", 2, gpus=4), min_member=2,
               topology=TopologyConstraint(preferred_level="rack"))
    result = run_cycle(snapshot(cluster, QUEUES, [busy, job], levels=RACKS))
    # r1 has 10 free GPUs (fuller than r0's 16) and holds both pods
    assert set(bound_nodes(result).values()) == {"r1-n1"}


def test_preferred_rack_falls_back_to_the_whole_cluster():
    job = gang("job", "team", pods("p", 3, gpus=8), min_member=3,
               topology=TopologyConstraint(preferred_level="rack"))
    result = run_cycle(snapshot(racked(), QUEUES, [job], levels=RACKS))
    assert len(result.bindings) == 3


def test_required_rack_backtracks_past_a_fragmented_rack():
    cluster = racked(per_rack=2, racks=2, gpus=8)
    used = [gang("u0", "team", pods("u0", 1, gpus=4, node="r0-n0")),
            gang("u1", "team", pods("u1", 1, gpus=4, node="r0-n1"))]
    job = gang("job", "team", pods("p", 1, gpus=8), topology=TopologyConstraint("rack"))
    result = run_cycle(snapshot(cluster, QUEUES, used + [job], levels=RACKS))
    assert bound_nodes(result)["p-0"].startswith("r1-")


def test_nodes_without_the_level_label_are_outside_every_domain():
    cluster = [Node("bare", 8)]
    job = gang("job", "team", pods("p", 1, gpus=1), topology=TopologyConstraint("rack"))
    result = run_cycle(snapshot(cluster, QUEUES, [job], levels=RACKS))
    assert result.bindings == ()
    assert [r.code for r in result.explanation("job")] == ["topology_no_domain"]


def test_binpack_fills_the_fullest_node_and_spread_the_emptiest():
    cluster = [Node("a", 8), Node("b", 8)]
    used = gang("used", "team", pods("used", 1, gpus=4, node="b"))
    job = gang("job", "team", pods("p", 1, gpus=1))
    packed = run_cycle(snapshot(cluster, QUEUES, [used, job]))
    spread = run_cycle(snapshot(cluster, QUEUES, [used, job], placement="spread"))
    assert bound_nodes(packed) == {"p-0": "b"}
    assert bound_nodes(spread) == {"p-0": "a"}


def test_topology_aliases_name_levels():
    from scheduler.core.model import Topology, TopologyLevel
    aliased = Topology(levels=(TopologyLevel("topology.kubernetes.io/rack", alias="rack"),))
    cluster = [Node(f"n{i}", 8, labels={"topology.kubernetes.io/rack": f"r{i}"})
               for i in range(2)]
    job = gang("job", "team", pods("p", 2, gpus=8), min_member=2,
               topology=TopologyConstraint("rack"))
    result = run_cycle(snapshot(cluster, QUEUES, [job], levels=aliased))
    assert result.bindings == ()
    assert result.explanation("job")[0].level == "rack"
