"""Consolidation (KAI's consolidation action): running preemptible pods move so a pending gang
that fits the free GPUs in total, but not per node, can start."""

from scheduler.core.cycle import run_cycle
from scheduler.core.results import CONSOLIDATED
from tests.unit.scheduler_core.builders import gang, leaf, nodes, pods, queue, snapshot


def running(name, queue_name, node, gpus=1, preemptible=True, started=0.0, **fields):
    return gang(name, queue_name, pods(name, 1, gpus=gpus, node=node),
                priority=50 if preemptible else 100, preemptible=preemptible,
                running_since=started, created_at=started, **fields)


def placement(result, snap):
    """Node of every pod after the cycle: snapshot, then moves, then bindings."""
    where = {pod.name: pod.node for g in snap.gangs for pod in g.pods}
    for move in result.moves:
        assert where[move.pod] == move.source
        where[move.pod] = move.target
    for binding in result.bindings:
        where[binding.pod] = binding.node
    return where


def test_two_single_gpu_jobs_are_packed_for_a_two_gpu_job():
    # KAI pkg/scheduler/actions/integration_tests/consolidation/consolidation_test.go: "1 train
    # job of 1 GPU running on node0, 1 train job of 1 GPU running on node 0, 1 pending job of 2
    # GPUs - consolidate"
    # KAI's fake jobs are created in list order, so running_job1 is the newer one and the
    # first victim: it moves to node0 and the pending job takes node1.
    cluster = nodes(2, gpus=2)
    queues = (queue("root"), queue("queue0", "root", quota=1))
    jobs = [running("running_job0", "queue0", cluster[0].name, started=0.0),
            running("running_job1", "queue0", cluster[1].name, started=1.0),
            gang("pending_job0", "queue0", pods("pending_job0", 1, gpus=2), priority=50,
                 preemptible=True, created_at=10.0)]
    snap = snapshot(cluster, queues, jobs)
    result = run_cycle(snap)
    assert result.evictions == ()
    (move,) = result.moves
    assert (move.pod, move.source, move.target, move.reason, move.by_gang) == (
        "running_job1-0", cluster[1].name, cluster[0].name, CONSOLIDATED, "pending_job0")
    assert placement(result, snap) == {"running_job0-0": cluster[0].name,
                                       "running_job1-0": cluster[0].name,
                                       "pending_job0-0": cluster[1].name}


def test_non_preemptible_jobs_are_not_moved():
    # KAI pkg/scheduler/actions/integration_tests/consolidation/consolidation_test.go: "1 build
    # job of 1 GPU running on node0, 1 build job of 1 GPU running on node 0, 1 pending job of 2
    # GPUs - don't consolidate"
    cluster = nodes(2, gpus=2)
    queues = (queue("root"), queue("queue0", "root", quota=1))
    jobs = [running("running_job0", "queue0", cluster[0].name, preemptible=False),
            running("running_job1", "queue0", cluster[1].name, preemptible=False),
            gang("pending_job0", "queue0", pods("pending_job0", 1, gpus=2), priority=50,
                 preemptible=True, created_at=10.0)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert (result.moves, result.bindings, result.evictions) == ((), (), ())


def test_a_gang_is_consolidated_only_if_every_moved_pod_finds_a_node():
    # KAI pkg/scheduler/actions/consolidation/consolidation.go (allPodsReallocated): a
    # consolidation that would leave a victim pod without a node is not taken.
    cluster = nodes(3, gpus=4)
    queues = (queue("root"), queue("team", "root"))
    jobs = [running("a", "team", cluster[0].name, gpus=3),
            running("b", "team", cluster[1].name, gpus=3),
            running("c", "team", cluster[2].name, gpus=2),
            gang("wide", "team", pods("wide", 1, gpus=4), priority=50, preemptible=True,
                 created_at=10.0)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert (result.moves, result.bindings) == ((), ())
    snap = snapshot(cluster, queues, jobs[:2] + [running("c", "team", cluster[2].name),
                                                 jobs[3]])
    result = run_cycle(snap)
    assert len(result.moves) == 1 and [b.pod for b in result.bindings] == ["wide-0"]
    where = placement(result, snap)
    used = {}
    for g in snap.gangs:
        for pod in g.pods:
            used[where[pod.name]] = used.get(where[pod.name], 0) + pod.gpus
    assert all(total <= 4 for total in used.values())


def test_a_fragmented_gang_of_several_pods_is_consolidated():
    # KAI pkg/scheduler/actions/integration_tests/consolidation/consolidationGang_test.go:
    # "consolidate gang job to be able to allocate pending job"
    cluster = nodes(4, gpus=4)
    queues = (queue("root"), queue("team", "root"))
    jobs = [running(f"small-{i}", "team", cluster[i].name, gpus=2) for i in range(4)]
    jobs.append(gang("pair", "team", pods("pair", 2, gpus=4), min_member=2, priority=50,
                     preemptible=True, created_at=10.0))
    snap = snapshot(cluster, queues, jobs)
    result = run_cycle(snap)
    assert sorted(b.pod for b in result.bindings) == ["pair-0", "pair-1"]
    assert len(result.moves) == 2
    where = placement(result, snap)
    assert where["pair-0"] != where["pair-1"]


def test_gangs_with_topology_or_semi_preemptible_cores_are_not_moved():
    cluster = nodes(2, gpus=2)
    queues = (queue("root"), queue("team", "root"))
    semi = gang("semi", "team", pods("semi", 1, node=cluster[0].name, subgroup="w"),
                subgroups=[leaf("w", 1)], semi_preemptible=True, running_since=0.0)
    pinned = gang("pinned", "team", pods("pinned", 1, node=cluster[1].name, subgroup="w"),
                  subgroups=[leaf("w", 1, required="rack")], priority=50, preemptible=True,
                  running_since=0.0)
    wide = gang("wide", "team", pods("wide", 1, gpus=2), priority=50, preemptible=True,
                created_at=10.0)
    result = run_cycle(snapshot(cluster, queues, [semi, pinned, wide]))
    assert result.moves == () and result.bindings == ()


def test_consolidation_can_be_disabled():
    cluster = nodes(2, gpus=2)
    queues = (queue("root"), queue("queue0", "root"))
    jobs = [running("j0", "queue0", cluster[0].name), running("j1", "queue0", cluster[1].name),
            gang("p", "queue0", pods("p", 1, gpus=2), priority=50, preemptible=True)]
    result = run_cycle(snapshot(cluster, queues, jobs, consolidate=False))
    assert result.moves == ()
