"""Reclaim across queues, preempt within a queue, and stale-gang eviction."""

from dataclasses import replace

from scheduler.core.cycle import run_cycle
from scheduler.core.results import PREEMPTED, RECLAIMED, STALE
from tests.unit.scheduler_core.builders import (
    bound_nodes,
    flat_queues,
    gang,
    leaf,
    nodes,
    pods,
    queue,
    snapshot,
)

CLUSTER = nodes(4)  # 32 GPUs


def borrowers(queue_name="b", count=8, priority=50, preemptible=True, **fields):
    """4-GPU single-pod gangs filling the cluster, two per node, newest on the last node."""
    return [gang(f"{queue_name}-{i}", queue_name, pods(f"{queue_name}-{i}", 1, gpus=4,
                                                       node=CLUSTER[i // 2].name),
                 priority=priority, preemptible=preemptible, running_since=float(i),
                 created_at=float(i), **fields)
            for i in range(count)]


def test_in_quota_gang_reclaims_newest_borrowers_on_one_node():
    queues = flat_queues("a", "b", quota=8)
    pending = gang("a-job", "a", pods("a", 1, gpus=8), created_at=100)
    result = run_cycle(snapshot(CLUSTER, queues, borrowers() + [pending], now=200))
    assert [(e.gang, e.reason, e.by_gang) for e in result.evictions] == [
        ("b-6", RECLAIMED, "a-job"), ("b-7", RECLAIMED, "a-job")]
    assert bound_nodes(result) == {"a-0": CLUSTER[3].name}
    b = result.queue("b").figures("gpu")
    assert (b.fair_share, b.allocated) == (24, 24)


def test_reclaim_never_takes_the_victim_queue_below_its_fair_share():
    queues = (queue("root"), queue("a", "root", quota=0, weight=1),
              queue("b", "root", quota=0, weight=3))
    first = gang("a-1", "a", pods("x", 1, gpus=8), created_at=100, preemptible=True)
    second = gang("a-2", "a", pods("y", 1, gpus=8), created_at=101, preemptible=True)
    result = run_cycle(snapshot(CLUSTER, queues, borrowers() + [first, second]))
    assert {b.gang for b in result.bindings} == {"a-1"}
    assert result.queue("b").figures("gpu").allocated == 24
    assert result.queue("b").figures("gpu").fair_share == 24
    codes = [r.code for r in result.explanation("a-2")]
    assert "queue_over_fair_share" in codes


def test_non_preemptible_work_is_never_reclaimed():
    queues = flat_queues("a", "b", quota=8)
    pending = gang("a-job", "a", pods("a", 1, gpus=8))
    result = run_cycle(snapshot(CLUSTER, queues,
                                borrowers(priority=100, preemptible=False) + [pending]))
    assert result.evictions == ()
    assert result.bindings == ()


def test_higher_priority_preempts_lower_priority_in_same_queue():
    queues = flat_queues("b")
    urgent = gang("urgent", "b", pods("u", 1, gpus=8), priority=125, created_at=100)
    result = run_cycle(snapshot(CLUSTER, queues, borrowers() + [urgent]))
    assert [(e.gang, e.reason) for e in result.evictions] == [("b-6", PREEMPTED),
                                                              ("b-7", PREEMPTED)]
    assert bound_nodes(result) == {"u-0": CLUSTER[3].name}


def test_equal_priority_does_not_preempt():
    queues = flat_queues("b")
    same = gang("same", "b", pods("u", 1, gpus=8), priority=50, preemptible=True)
    result = run_cycle(snapshot(CLUSTER, queues, borrowers() + [same]))
    assert result.evictions == ()


def test_only_the_elastic_surplus_of_a_semi_preemptible_gang_is_evicted():
    queues = flat_queues("a", "b", quota=8)
    subgroups = [leaf("workers", 2)]
    pod_list = [replace(pod, node=CLUSTER[i // 2].name)
                for i, pod in enumerate(pods("w", 8, gpus=4, subgroup="workers"))]
    running = gang("elastic", "b", pod_list, subgroups=subgroups, semi_preemptible=True)
    pending = gang("a-job", "a", pods("a", 1, gpus=8))
    result = run_cycle(snapshot(CLUSTER, queues, [running, pending]))
    evicted = sorted(e.pod for e in result.evictions)
    assert evicted == ["w-6", "w-7"]
    assert all(e.reason == RECLAIMED for e in result.evictions)


def stale_gang(**fields):
    pod_list = pods("s", 2, gpus=4, node=CLUSTER[0].name) + pods("t", 1, gpus=8)
    return gang("broken", "team", pod_list, min_member=3, **fields)


def full_cluster_other_work():
    return [gang(f"busy-{i}", "team", pods(f"busy-{i}", 1, gpus=8, node=CLUSTER[i].name))
            for i in range(1, 4)]


def test_stale_gang_is_reported_then_evicted_after_grace():
    queues = flat_queues("team")
    result = run_cycle(snapshot(CLUSTER, queues, [stale_gang()] + full_cluster_other_work(),
                                now=1000))
    assert result.evictions == ()
    (entry,) = result.stale
    assert (entry.gang, entry.since, entry.evict_at, entry.evicted) == ("broken", 1000, 1060,
                                                                         False)
    later = run_cycle(snapshot(CLUSTER, queues,
                               [stale_gang(below_min_since=1000)] + full_cluster_other_work(),
                               now=1060))
    assert [(e.pod, e.reason) for e in later.evictions] == [("s-0", STALE), ("s-1", STALE)]
    assert later.stale[0].evicted


def test_stale_eviction_can_be_disabled_per_gang():
    result = run_cycle(snapshot(CLUSTER, flat_queues("team"),
                                [stale_gang(below_min_since=0, staleness_grace_seconds=-1)]
                                + full_cluster_other_work(), now=10_000))
    assert result.evictions == ()


def test_stale_gang_recovers_when_its_missing_pod_fits():
    result = run_cycle(snapshot(CLUSTER, flat_queues("team"), [stale_gang(below_min_since=990)],
                                now=1000))
    assert bound_nodes(result) == {"t-0": CLUSTER[1].name}
    assert result.stale == ()


def test_only_required_subgroups_count_for_staleness():
    subgroups = [leaf("r0", 1), leaf("r1", 1), leaf("r2", 1)]
    pod_list = (pods("r0", 1, subgroup="r0", node=CLUSTER[0].name)
                + pods("r1", 1, subgroup="r1", node=CLUSTER[0].name)
                + pods("r2", 1, subgroup="r2", gpus=64))
    job = gang("two-of-three", "team", pod_list, subgroups=subgroups, min_subgroup=2,
               below_min_since=0)
    result = run_cycle(snapshot(CLUSTER, flat_queues("team"), [job], now=1000))
    assert result.stale == ()
    assert result.evictions == ()
