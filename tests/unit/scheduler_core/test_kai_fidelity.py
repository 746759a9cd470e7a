"""Scenarios from KAI Scheduler's own test tables, replayed on our core.

Each test names the KAI file and case it comes from. KAI's "train" jobs are preemptible (our
LOW priority), its "build"/"interactive" jobs non-preemptible (our NORMAL/HIGH); KAI's
`DeservedGPUs` is our queue `quota`, `GPUOverQuotaWeight` our `weight`, a "department" a
parent queue.
"""

from scheduler.core.cycle import run_cycle
from scheduler.core.results import RECLAIMED
from tests.unit.scheduler_core.builders import (
    bound_nodes,
    gang,
    leaf,
    nodes,
    pods,
    queue,
    snapshot,
)


def train(name, queue_name, gpus=1, count=1, node=None, started=0.0, **fields):
    """A preemptible (KAI train) gang of `count` pods of `gpus` GPUs."""
    fields.setdefault("created_at", started)
    return gang(name, queue_name, pods(name, count, gpus=gpus, node=node),
                priority=50, preemptible=True,
                running_since=started if node else None, **fields)


def evicted_gangs(result):
    return sorted({eviction.gang for eviction in result.evictions})


def bound_gangs(result):
    return sorted({binding.gang for binding in result.bindings})


# --- 1. queue order with an empty queue ----------------------------------------------------


def test_queue_without_deserved_waits_for_a_queue_with_deserved():
    # KAI pkg/scheduler/actions/allocate/allocate_test.go:
    # "queue0 has no deserved GPUs, queue1 has deserved - allocate jobs queue1"
    cluster = nodes(1, gpus=1)
    for deserved in (1, 2):
        queues = (queue("root"), queue("queue0", "root", quota=0),
                  queue("queue1", "root", quota=deserved))
        jobs = [train("pending_job0", "queue0"), train("pending_job1", "queue1")]
        result = run_cycle(snapshot(cluster, queues, jobs))
        assert bound_gangs(result) == ["pending_job1"]
        assert result.evictions == ()


# --- 2. order by the share the queue would have after its next job --------------------------


def test_queue_that_would_pass_its_deserved_waits():
    # KAI pkg/scheduler/actions/allocate/allocate_test.go: "Both queues have deserved of 2,
    # overall 4 gpus, queue0 will pass the deserved if its pending jobs will be allocated -
    # allocate a job from queue1"
    cluster = nodes(1, gpus=4)
    queues = (queue("root"), queue("queue0", "root", quota=2), queue("queue1", "root", quota=2))
    jobs = [train("running_job0", "queue0", node=cluster[0].name),
            train("running_job1", "queue1", node=cluster[0].name),
            train("pending_job0", "queue0", gpus=2, started=10),
            train("pending_job1", "queue1", started=11)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert bound_gangs(result) == ["pending_job1"]
    assert result.evictions == ()


def test_equal_share_after_job_goes_to_the_queue_using_less_now():
    # KAI pkg/scheduler/actions/allocate/allocate_test.go: "queue0 has deserved of 3, queue 1
    # has deserved of 2, they will both have a share of 1 if allocated their task, yet for fair
    # convergence - queue1 should allocate the task"
    cluster = nodes(1, gpus=4)
    queues = (queue("root"), queue("queue0", "root", quota=3), queue("queue1", "root", quota=2))
    jobs = [train("running_job0", "queue0", gpus=2, node=cluster[0].name),
            train("pending_job0", "queue0", started=10),
            train("pending_job1", "queue1", gpus=2, started=11)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert bound_gangs(result) == ["pending_job1"]


def test_equal_shares_go_to_the_queue_with_the_smaller_allocatable_share():
    # KAI pkg/scheduler/actions/allocate/allocate_test.go: "Both queues has the same share,
    # give the one with smaller job - allocate jobs queue1"
    cluster = nodes(1, gpus=5)
    node = cluster[0].name
    queues = (queue("root"), queue("queue0", "root", quota=4), queue("queue1", "root", quota=2))
    jobs = [train("running_job0", "queue0", gpus=2, node=node),
            train("running_job1", "queue1", node=node),
            train("pending_job0", "queue0", gpus=2, started=10),
            train("pending_job1", "queue1", started=11)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert bound_gangs(result) == ["pending_job1"]


def test_exactly_equal_queues_go_by_creation():
    # KAI pkg/scheduler/actions/allocate/allocate_test.go: "Both queues has exactly the same
    # share - give priority to the created 1st (queue0)"
    cluster = nodes(1, gpus=5)
    node = cluster[0].name
    queues = (queue("root"), queue("queue0", "root", quota=2), queue("queue1", "root", quota=2))
    jobs = [train("running_job0", "queue0", gpus=2, node=node),
            train("running_job1", "queue1", gpus=2, node=node),
            train("pending_job0", "queue0", started=10),
            train("pending_job1", "queue1", started=11)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert bound_gangs(result) == ["pending_job0"]


# --- 3. elastic growth across gangs ---------------------------------------------------------


def test_elastic_growth_is_shared_pod_by_pod():
    # KAI pkg/scheduler/actions/allocate/allocateElastic_test.go:
    # "Allocate 2 elastic jobs - both partial allocate"
    cluster = nodes(1, gpus=5)
    queues = (queue("root"), queue("queue0", "root", quota=5))
    jobs = [gang(f"pending_job{i}", "queue0", pods(f"pending_job{i}", 4), min_member=1,
                 priority=50, preemptible=True, created_at=float(i)) for i in range(2)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    placed = bound_nodes(result)
    assert sorted(placed) == ["pending_job0-0", "pending_job0-1", "pending_job0-2",
                              "pending_job1-0", "pending_job1-1"]


# --- 5. quotas larger than the cluster ------------------------------------------------------


def test_deserved_is_not_scaled_down_when_quotas_exceed_the_cluster():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go: "1 running job over
    # quota but with queue that has higher reclaimable deserved gpus, other job is pending but
    # asks the exact amount of GPUs as in deserved, cluster is in over capacity - reclaim"
    cluster = nodes(1, gpus=8)
    queues = (queue("root"), queue("queue0", "root", quota=6, weight=6),
              queue("queue1", "root", quota=5, weight=5))
    jobs = [train("running_job0", "queue0", gpus=8, node=cluster[0].name),
            train("pending_job0", "queue1", gpus=5, started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert evicted_gangs(result) == ["running_job0"]
    assert bound_gangs(result) == ["pending_job0"]
    assert result.queue("queue1").figures("gpu").fair_share == 5


def test_lone_queue_keeps_its_deserved_as_fair_share_above_the_cluster():
    # KAI pkg/scheduler/plugins/proportion/resource_division/resource_division_test.go,
    # SetResourcesShare "one queue", "Not enough resources - should gets all cluster": the
    # deserved part is min(deserved, requested), not capped by the cluster ("in over
    # subscription the fair share is the deserved of each: first come, first served")
    cluster = nodes(1, gpus=2)
    queues = (queue("root"), queue("pool", "root", quota=4), queue("team", "pool", quota=4))
    jobs = [train("big", "team", gpus=1, count=4)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert result.queue("team").figures("gpu").fair_share == 4
    assert result.queue("pool").figures("gpu").fair_share == 4
    assert len(result.bindings) == 2


# --- 6. reclaim floors ----------------------------------------------------------------------


def test_victim_queue_over_deserved_may_drop_below_it_by_its_last_victim():
    # KAI pkg/scheduler/actions/reclaim/reclaim_test.go: "queue1 is under deserved quota,
    # queue0 is over deserved quota and will go below quota - reclaim"
    cluster = nodes(2, gpus=16)
    queues = (queue("root"), queue("queue0", "root", quota=10), queue("queue1", "root", quota=10))
    running = gang("q0_running_job", "queue0",
                   (pods("q0-a", 1, gpus=10, node=cluster[0].name)
                    + pods("q0-b", 1, gpus=10, node=cluster[1].name)),
                   min_member=2, priority=50, preemptible=True, running_since=0.0)
    pending = train("q1_pending_job", "queue1", gpus=10, started=10)
    result = run_cycle(snapshot(cluster, queues, [running, pending]))
    assert evicted_gangs(result) == ["q0_running_job"]
    assert bound_gangs(result) == ["q1_pending_job"]


def test_reclaim_takes_from_the_less_prioritized_queue_first():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go: "2 train job for
    # overquota project 1, 1 job for overquota project with deserved of 0, 1 job recalim from
    # different project - reclaim from less prioritized queue"
    cluster = nodes(1, gpus=4)
    node = cluster[0].name
    queues = (queue("root"), queue("queue0", "root", quota=1, weight=1),
              queue("queue1", "root", quota=1, weight=1),
              queue("queue2", "root", quota=1, weight=0, priority=101))
    jobs = [train("running_job0", "queue0", node=node, started=0),
            train("running_job1", "queue0", node=node, started=1),
            train("running_job2", "queue2", node=node, started=2),
            train("running_job3", "queue2", node=node, started=3),
            train("pending_job0", "queue1", started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert evicted_gangs(result) == ["running_job1"]
    assert bound_gangs(result) == ["pending_job0"]


def test_department_over_deserved_is_reclaimed_from():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go: "d2 is under
    # deserved quota and d1 is over quota and within fair share - reclaim"
    cluster = nodes(2, gpus=3)
    queues = (queue("root"), queue("d1", "root", quota=2), queue("d2", "root", quota=2),
              queue("queue0", "d1", quota=2, weight=3), queue("queue1", "d2", quota=2, weight=0))
    build = gang("running_job1", "queue0", pods("running_job1", 1, gpus=2, node=cluster[1].name),
                 priority=100, running_since=0.0)
    jobs = [train("running_job0", "queue0", gpus=2, node=cluster[0].name), build,
            train("pending_job0", "queue1", gpus=2, started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert evicted_gangs(result) == ["running_job0"]
    assert bound_nodes(result) == {"pending_job0-0": cluster[0].name}
    assert all(eviction.reason == RECLAIMED for eviction in result.evictions)


def test_reclaim_from_other_department_and_own_department():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go:
    # "Reclaim from different department and same department"
    cluster = nodes(1, gpus=4)
    node = cluster[0].name
    queues = (queue("root"), queue("d1", "root", quota=0), queue("d2", "root", quota=4),
              queue("queue0", "d1", quota=1, weight=1), queue("queue1", "d2", quota=0, weight=0),
              queue("queue2", "d2", quota=4, weight=4))
    jobs = [train("running_job0", "queue0", gpus=2, node=node),
            train("running_job1", "queue1", gpus=2, node=node),
            train("pending_job0", "queue2", gpus=4, started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert evicted_gangs(result) == ["running_job0", "running_job1"]
    assert bound_gangs(result) == ["pending_job0"]


# --- 8. why a reclaim was refused -----------------------------------------------------------


def test_refused_reclaim_names_the_protected_queue_and_its_floor():
    cluster = nodes(1, gpus=8)
    queues = (queue("root"), queue("a", "root", quota=4), queue("b", "root", quota=6))
    jobs = [train("b-job", "b", gpus=6, node=cluster[0].name),
            train("a-job", "a", gpus=4, started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert result.evictions == ()
    reasons = result.explanation("a-job")
    protected = [reason for reason in reasons if reason.code == "reclaim_victim_protected"]
    assert protected, reasons
    message = protected[0].message
    assert "'b'" in message and "deserved quota of 6 GPUs" in message
    assert protected[0].queue == "b"


def test_elastic_surplus_victims_carry_the_gang_and_keep_its_core():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go:
    # "Reclaim only over quota task from elastic Job"
    cluster = nodes(1, gpus=4)
    node = cluster[0].name
    queues = (queue("root"), queue("queue0", "root", quota=2), queue("queue1", "root", quota=2))
    elastic = gang("elastic", "queue0", pods("e", 4, node=node, subgroup="w"),
                   subgroups=[leaf("w", 1)], priority=50, preemptible=True, running_since=0.0)
    pending = train("pending", "queue1", gpus=2, started=10)
    result = run_cycle(snapshot(cluster, queues, [elastic, pending]))
    assert sorted(e.pod for e in result.evictions) == ["e-2", "e-3"]
    assert bound_gangs(result) == ["pending"]


def build(name, queue_name, node, gpus=1):
    """A non-preemptible (KAI build) running gang."""
    return gang(name, queue_name, pods(name, 1, gpus=gpus, node=node), priority=100,
                running_since=0.0)


def departments(d1, d2, leaves):
    """root -> d1, d2 (deserved quotas) -> leaves: (name, parent, deserved, weight)."""
    return ((queue("root"), queue("d1", "root", quota=d1), queue("d2", "root", quota=d2))
            + tuple(queue(name, parent, quota=deserved, weight=weight)
                    for name, parent, deserved, weight in leaves))


def test_no_reclaim_when_the_reclaimers_department_would_pass_its_share():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go:
    # "Don't reclaim if department will be overquota"
    cluster = nodes(1, gpus=4)
    node = cluster[0].name
    queues = departments(2, 2, [("queue0", "d1", 1, 1), ("queue1", "d2", 1, 1),
                                ("queue2", "d2", 1, 1)])
    jobs = [train("running_job0", "queue0", gpus=3, node=node),
            build("running_job1", "queue1", node),
            train("pending_job0", "queue1", gpus=2, started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert (result.evictions, result.bindings) == ((), ())


def test_no_reclaim_when_departments_are_over_deserved_within_fair_share():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go: "departments and
    # queues are over deserved quota and within fair share - should not reclaim"
    cluster = nodes(2, gpus=3)
    n0, n1 = cluster[0].name, cluster[1].name
    queues = departments(1, 1, [("queue0", "d1", 1, 1), ("queue1", "d2", 1, 1)])
    jobs = [train("running_job0", "queue0", gpus=2, node=n0), build("running_job1", "queue0", n1),
            train("running_job2", "queue1", gpus=2, node=n1),
            train("running_job3", "queue1", node=n0),
            train("pending_job0", "queue1", started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert (result.evictions, result.bindings) == ((), ())


def test_no_reclaim_when_both_departments_are_under_deserved():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go:
    # "both departments are under deserved quota - should not reclaim"
    cluster = nodes(2, gpus=1)
    queues = departments(2, 2, [("queue0", "d1", 1, 0), ("queue1", "d2", 1, 0)])
    jobs = [train("running_job0", "queue0", node=cluster[0].name),
            build("running_job1", "queue1", cluster[1].name),
            train("pending_job0", "queue1", started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert (result.evictions, result.bindings) == ((), ())


def test_reclaim_from_a_sibling_queue_over_its_share_inside_the_department():
    # KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go: "both departments got
    # deserved quota, a queue within d2 is under quota - reclaim from another queue"
    cluster = nodes(2, gpus=3)
    n0, n1 = cluster[0].name, cluster[1].name
    queues = departments(3, 3, [("queue0", "d1", 3, 0), ("queue1", "d2", 2, 0),
                                ("queue2", "d2", 1, 0)])
    jobs = [train("running_job0", "queue0", gpus=2, node=n0), build("running_job1", "queue0", n1),
            train("running_job2", "queue1", gpus=2, node=n1, started=1),
            train("running_job3", "queue1", node=n0, started=2),
            train("pending_job0", "queue2", started=10)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert evicted_gangs(result) == ["running_job3"]
    assert bound_nodes(result) == {"pending_job0-0": n0}


# --- 9. issue fixes: KAI tables we used to differ from -----------------------------------


def test_reclaim_from_the_most_saturated_department_evicts_one_job():
    # KAI pkg/scheduler/actions/reclaim/reclaimDepartments_test.go: "Reclaim from overquota
    # department with multiple departments": one inference job of d1 reclaims one GPU; only
    # d2_job8 (d2 at 8 of its 4 deserved, the newest) is evicted. d1 then holds 5 of its fair
    # share 4, which KAI allows: it stays less saturated (5/4) than d2 (7/4).
    cluster = nodes(1, gpus=16)
    node = cluster[0].name
    queues = (queue("root"),
              *(queue(f"d{i}", "root", quota=4) for i in range(1, 5)),
              queue("d1_project1", "d1", quota=3, weight=3),
              queue("d1_project2", "d1", quota=1, weight=1),
              queue("d2_project1", "d2", quota=4, weight=4),
              queue("d3_project1", "d3", quota=4, weight=4),
              queue("d4_project1", "d4", quota=4, weight=4))
    jobs = [gang("d1_p1_pending_job", "d1_project1", pods("d1_p1_pending_job", 1),
                 priority=125, created_at=20.0)]
    started = 0
    for project, count in (("d1_project2", 4), ("d2_project1", 8), ("d3_project1", 4)):
        for j in range(1, count + 1):
            prefix = {"d1_project2": "d1_p2", "d2_project1": "d2", "d3_project1": "d3"}[project]
            started += 1
            jobs.append(train(f"{prefix}_job{j}", project, node=node, started=float(started)))
    jobs.append(train("d4_job1", "d4_project1", gpus=5, started=19.0))
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert evicted_gangs(result) == ["d2_job8"]
    assert bound_gangs(result) == ["d1_p1_pending_job"]


def test_a_gang_placed_by_consolidation_is_the_first_victim_of_a_reclaim_in_the_same_cycle():
    # KAI pkg/scheduler/actions/integration_tests/consolidation_and_reclaim/
    # consolidation_and_reclaim_test.go: "4 jobs of queue0 - 3 running 1 pending will
    # consolidate, 1 pending job from queue1 - reclaim". KAI pipelines pending_job0 after
    # moving running_job1 to node0, then queue1's reclaim takes it back (newest first) with
    # running_job2: pending_job0 never starts, pending_job1 runs on node1.
    cluster = nodes(2, gpus=4)
    n0, n1 = cluster[0].name, cluster[1].name
    queues = (queue("root"), queue("queue0", "root", quota=4), queue("queue1", "root", quota=4))
    jobs = [train("running_job0", "queue0", gpus=2, node=n0, started=0.0),
            train("running_job1", "queue0", gpus=2, node=n1, started=1.0),
            train("running_job2", "queue0", gpus=1, node=n1, started=2.0),
            train("pending_job0", "queue0", gpus=3, started=3.0),
            train("pending_job1", "queue1", gpus=4, started=4.0)]
    result = run_cycle(snapshot(cluster, queues, jobs))
    assert [(m.pod, m.target) for m in result.moves] == [("running_job1-0", n0)]
    assert evicted_gangs(result) == ["running_job2"]
    assert bound_nodes(result) == {"pending_job1-0": n1}
    assert [r.code for r in result.explanation("pending_job0")][:1] == ["reclaimed_this_cycle"]
