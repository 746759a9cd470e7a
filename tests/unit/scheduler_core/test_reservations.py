"""Reservations and backfill (EASY backfill for gangs that waited): who reserves which nodes,
when the gang is expected to start, and who may still use the reserved nodes meanwhile."""

from scheduler.core.cycle import run_cycle
from scheduler.core.model import Pod
from scheduler.core.reservation import Reserver
from tests.unit.scheduler_core.builders import bound_nodes, gang, nodes, pods, queue, snapshot

NOW = 1000.0


def running(name, node, count=3, ends=None, started=NOW - 30, queue_name="team", **fields):
    """`count` 1-GPU pods on `node`, reaching their exec_timeout at `ends` (None: no timeout)."""
    return gang(name, queue_name, pods(name, count, node=node), min_member=count,
                running_since=started, created_at=started,
                exec_timeout=None if ends is None else ends - started,
                workload=f"workflow {name!r}", **fields)


def waiting(name, gpus=4, waited=60.0, queue_name="team", exec_timeout=300.0, **fields):
    return gang(name, queue_name, pods(name, 1, gpus=gpus), created_at=NOW - waited,
                exec_timeout=exec_timeout, **fields)


def small(name, exec_timeout, waited=1.0, queue_name="team", **fields):
    return gang(name, queue_name, pods(name, 1), created_at=NOW - waited + 0.5,
                exec_timeout=exec_timeout, **fields)


def two_busy_nodes(**running_fields):
    """node-000: 3 of 4 GPUs busy until NOW+100; node-001: 3 busy until NOW+50."""
    cluster = nodes(2, gpus=4)
    return cluster, [running("a", cluster[0].name, ends=NOW + 100),
                     running("b", cluster[1].name, ends=NOW + 50, **running_fields)]


QUEUES = (queue("root"), queue("team", "root"))


def test_a_gang_that_waited_reserves_the_nodes_it_gets_soonest_and_fresh_long_work_goes_elsewhere():
    cluster, busy = two_busy_nodes()
    jobs = busy + [waiting("big"), small("long-1", exec_timeout=600),
                   small("long-2", exec_timeout=600)]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    estimate = result.estimate("big")
    assert (estimate.at, estimate.nodes, estimate.waits_for, estimate.gpus) == (
        NOW + 50, ("node-001",), ("workflow 'b'",), 4)
    # node-001's free GPU is held for the gang: the first long job takes node-000's, the
    # second finds nothing it may use
    assert bound_nodes(result) == {"long-1-0": "node-000"}
    reasons = {r.code: r.message for r in result.explanation("big")}
    assert reasons["reserved_start"] == ("reserved nodes node-001; expected start in 50 s, "
                                         "when workflow 'b' reaches its exec_timeout")
    held = {r.code: r for r in result.explanation("long-2")}["reserved_for_other"]
    assert held.message == ("1 GPU on node-001 are reserved for gang 'big', which has waited "
                            "1 min, expected to start in 50 s; gang 'long-2' would still be "
                            "running then, so it may not use them")
    assert result.queue("team").figures("gpu").reserved == 4


def test_work_that_ends_before_the_reserved_start_backfills_the_held_gpus():
    cluster, busy = two_busy_nodes()
    jobs = busy + [waiting("big"), small("long-1", exec_timeout=600),
                   small("short", exec_timeout=40)]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    assert bound_nodes(result) == {"long-1-0": "node-000", "short-0": "node-001"}
    assert result.estimate("big").at == NOW + 50


def test_a_fresh_gang_gets_no_reservation_so_smaller_work_goes_ahead_as_in_kai():
    cluster, busy = two_busy_nodes()
    jobs = busy + [waiting("big", waited=5.0), small("long-1", exec_timeout=600, waited=4),
                   small("long-2", exec_timeout=600, waited=4)]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    assert result.estimates == ()
    assert set(bound_nodes(result)) == {"long-1-0", "long-2-0"}
    assert run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW,
                              reserve_after_seconds=-1)).estimates == ()


def test_work_without_an_exec_timeout_in_the_way_gives_no_estimate_but_still_a_reservation():
    cluster = nodes(2, gpus=4)
    jobs = [running("a", cluster[0].name), running("b", cluster[1].name),
            waiting("big"), small("long-1", exec_timeout=600)]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    estimate = result.estimate("big")
    assert (estimate.at, estimate.nodes, estimate.untimed) == (None, ("node-000",),
                                                                ("workflow 'a'",))
    reasons = {r.code: r.message for r in result.explanation("big")}
    assert reasons["reserved_no_estimate"] == (
        "reserved nodes node-000; no start estimate: workflow 'a' on them runs without an "
        "exec_timeout")
    assert bound_nodes(result) == {"long-1-0": "node-001"}


def test_a_gang_larger_than_any_node_gets_no_reservation():
    cluster, busy = two_busy_nodes()
    result = run_cycle(snapshot(cluster, QUEUES, busy + [waiting("huge", gpus=8)], now=NOW))
    assert result.estimates == ()
    assert "reserved_start" not in {r.code for r in result.explanation("huge")}


def test_the_gang_starts_on_its_reserved_node_once_the_work_there_has_ended():
    cluster = nodes(2, gpus=4)
    jobs = [running("a", cluster[0].name, ends=NOW + 100), waiting("big"),
            small("long-1", exec_timeout=600)]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    assert bound_nodes(result) == {"big-0": "node-001", "long-1-0": "node-000"}
    assert result.estimates == ()


def test_the_gang_preempts_the_low_work_that_backfilled_its_nodes_when_they_are_free():
    cluster = nodes(2, gpus=4)
    low = gang("low", "team", pods("low", 1, node=cluster[1].name), priority=50,
               preemptible=True, running_since=NOW - 5, created_at=NOW - 6)
    jobs = [running("a", cluster[0].name, ends=NOW + 100), low, waiting("big"),
            small("long-1", exec_timeout=600)]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    assert bound_nodes(result) == {"big-0": "node-001", "long-1-0": "node-000"}
    assert [(e.gang, e.reason, e.by_gang) for e in result.evictions] == [
        ("low", "preempted", "big")]


def test_among_equally_soon_nodes_the_freest_now_is_reserved_so_the_choice_is_stable():
    cluster = nodes(3, gpus=4)
    jobs = [running("a", cluster[0].name, count=4, ends=NOW + 50),
            running("b", cluster[1].name, count=4, ends=NOW + 50),
            running("c", cluster[2].name, count=2, ends=NOW + 50), waiting("big")]
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    assert result.estimate("big").nodes == ("node-002",)
    assert set(result.estimate("big").waits_for) == {"workflow 'c'"}


def test_a_reservation_counts_against_its_queue_in_the_fair_order():
    cluster = nodes(3, gpus=4)
    queues = (queue("root"), queue("qa", "root"), queue("qb", "root"))
    jobs = [running("a", cluster[0].name, count=4, ends=NOW + 50, queue_name="qa"),
            running("b", cluster[1].name, count=3, ends=NOW + 60, queue_name="qb"),
            running("c", cluster[2].name, count=4, ends=NOW + 70, queue_name="qb"),
            waiting("big", queue_name="qa"),
            small("qa-job", exec_timeout=600, waited=2, queue_name="qa"),
            small("qb-job", exec_timeout=600, waited=1, queue_name="qb")]
    result = run_cycle(snapshot(cluster, queues, jobs, now=NOW))
    # qa holds 4 running + 4 reserved, qb 7: qb's job goes first for the one free GPU (without
    # the reservation counted, qa's would)
    assert result.estimate("big").nodes == ("node-000",)
    assert bound_nodes(result)["qb-job-0"] == "node-001"
    assert result.queue("qa").figures("gpu").reserved == 4
    assert result.queue("root").figures("gpu").reserved == 4


def test_one_reservation_per_queue_and_at_most_max_reservations_a_cycle():
    cluster = nodes(4, gpus=4)
    queues = (queue("root"), queue("qa", "root"), queue("qb", "root"))
    jobs = [running(f"r{i}", cluster[i].name, count=4, ends=NOW + 10 * (i + 1))
            for i in range(4)]
    jobs += [waiting("a1", queue_name="qa", waited=90), waiting("a2", queue_name="qa"),
             waiting("b1", queue_name="qb")]
    result = run_cycle(snapshot(cluster, queues, jobs, now=NOW))
    assert [(e.gang, e.nodes) for e in result.estimates] == [
        ("a1", ("node-000",)), ("b1", ("node-001",))]
    limited = run_cycle(snapshot(cluster, queues, jobs, now=NOW, max_reservations=1))
    assert [e.gang for e in limited.estimates] == ["a1"]


def test_a_gang_of_several_nodes_reserves_them_all_and_starts_at_the_last_deadline():
    cluster = nodes(4, gpus=4)
    jobs = [running(f"r{i}", cluster[i].name, count=4, ends=NOW + 10 * (i + 1))
            for i in range(4)]
    jobs.append(gang("wide", "team", pods("wide", 3, gpus=4), min_member=3,
                     created_at=NOW - 60, exec_timeout=600))
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW))
    estimate = result.estimate("wide")
    assert (estimate.at, estimate.nodes, estimate.waits_for) == (
        NOW + 30, ("node-000", "node-001", "node-002"), ("workflow 'r2'",))


def test_a_gang_its_queue_quota_refuses_now_reserves_the_quota_that_frees_up():
    # The case: the queue's quota is full of small non-preemptible jobs; each time
    # one ends, a younger one took its place and the gang ("queue over quota") never started.
    cluster = nodes(2, gpus=8)
    queues = (queue("root"), queue("team", "root", quota=8))
    jobs = [gang(f"s{i}", "team", pods(f"s{i}", 1, node=cluster[0].name), created_at=NOW - 40,
                 running_since=NOW - 40, exec_timeout=50.0 + 10 * i, workload=f"workflow 's{i}'")
            for i in range(7)]
    jobs += [waiting("big", gpus=8), small("long-1", exec_timeout=600),
             small("short", exec_timeout=30)]
    result = run_cycle(snapshot(cluster, queues, jobs, now=NOW))
    estimate = result.estimate("big")
    # all seven must give their quota back: the last deadline is NOW + 70
    assert (estimate.at, estimate.nodes, estimate.waits_for) == (
        NOW + 70, ("node-001",), ("workflow 's6'",))
    assert bound_nodes(result) == {"short-0": "node-000"}  # ends before: backfilled
    held = {r.code: r for r in result.explanation("long-1")}["reserved_for_other"]
    assert held.message == ("1 GPU of queue 'team''s quota are reserved for gang 'big', which "
                            "waits for them; this gang would still be running when it starts, "
                            "so it may not use them")
    codes = [r.code for r in result.explanation("big")]
    assert codes[:2] == ["reserved_start", "queue_over_quota"]


def test_a_gang_above_its_queue_quota_alone_gets_no_reservation():
    cluster = nodes(2, gpus=8)
    queues = (queue("root"), queue("team", "root", quota=4))
    result = run_cycle(snapshot(cluster, queues, [waiting("big", gpus=8)], now=NOW))
    assert result.estimates == ()
    assert [r.code for r in result.explanation("big")] == ["queue_over_quota"]


def test_a_gang_whose_own_running_pods_hold_the_quota_it_still_needs_gets_no_reservation():
    # half of it runs (below its minimum, within its stale grace) on the whole quota of its
    # queue: no other work will ever give back what it needs, so there is no start to plan
    cluster = nodes(2, gpus=8)
    queues = (queue("root"), queue("team", "root", quota=4))
    half = gang("half", "team", pods("half", 2, gpus=2, node=cluster[0].name)
                + (Pod("half-2", gpus=2), Pod("half-3", gpus=2)), min_member=4,
                created_at=NOW - 60, running_since=NOW - 30, exec_timeout=300.0)
    result = run_cycle(snapshot(cluster, queues, [half], now=NOW))
    assert result.estimates == () and result.bindings == ()
    assert [r.code for r in result.explanation("half")] == ["queue_over_quota"]
    assert [(s.gang, s.evicted) for s in result.stale] == [("half", False)]


def attempts(monkeypatch) -> list[str]:
    """The gangs whose reservation is worked out (not answered from what the cycle knows)."""
    tried: list[str] = []
    work_out = Reserver._reserve

    def spy(self, run, lower):
        tried.append(run.gang.name)
        return work_out(self, run, lower)

    monkeypatch.setattr(Reserver, "_reserve", spy)
    return tried


def test_a_backlog_that_finds_no_reservation_costs_one_attempt_until_the_cycle_changes(
        monkeypatch):
    # qa's wide gang reserves both nodes; none of qb's 50 waiting gangs finds a node left to
    # reserve: the first one's attempt answers for the others of its shape (the cycle used to
    # work each one out, quadratic in the backlog), and a gang of another shape has its own
    cluster = nodes(2, gpus=4)
    queues = (queue("root"), queue("qa", "root"), queue("qb", "root"))
    jobs = [running(f"r{i}", cluster[i].name, count=4, ends=NOW + 50, queue_name="qb")
            for i in range(2)]
    jobs.append(gang("wide", "qa", pods("wide", 2, gpus=4), min_member=2, created_at=NOW - 90,
                     exec_timeout=600))
    jobs += [waiting(f"b{i:02d}", queue_name="qb", waited=60 - i / 10) for i in range(50)]
    jobs.append(waiting("other", gpus=2, queue_name="qb", waited=1, exec_timeout=None))
    tried = attempts(monkeypatch)
    result = run_cycle(snapshot(cluster, queues, jobs, now=NOW,
                                reserve_after_seconds=0))
    assert [(e.gang, e.nodes) for e in result.estimates] == [
        ("wide", ("node-000", "node-001"))]
    assert tried == ["wide", "b00", "other"]
    assert result.bindings == ()
    assert [r.code for r in result.explanation("b49")] == ["insufficient_gpus"]


def test_after_a_placement_the_next_gang_of_the_shape_is_worked_out_again(monkeypatch):
    # no node will ever hold b0's 8-GPU pod; short-1 then takes node-000's free GPU, which
    # changes the cycle, so b1 (b0's shape) is worked out again, not answered from b0's attempt
    cluster = nodes(2, gpus=4)
    jobs = [running("r0", cluster[0].name, count=3, ends=NOW + 50),
            running("r1", cluster[1].name, count=4, ends=NOW + 40),
            waiting("b0", gpus=8, waited=80), small("short-1", 10),
            waiting("b1", gpus=8, waited=0.1)]
    tried = attempts(monkeypatch)
    result = run_cycle(snapshot(cluster, QUEUES, jobs, now=NOW, reserve_after_seconds=0))
    assert bound_nodes(result) == {"short-1-0": "node-000"}
    assert result.estimates == ()
    assert tried == ["b0", "b1"]


def test_gangs_larger_than_the_whole_cluster_are_not_worked_out_at_all(monkeypatch):
    tried = attempts(monkeypatch)
    jobs = [waiting(f"big-{i}", gpus=4) for i in range(20)]
    result = run_cycle(snapshot((), QUEUES, jobs, now=NOW))
    assert (result.estimates, result.bindings, tried) == ((), (), [])
    assert [r.code for r in result.explanation("big-7")] == ["insufficient_gpus"]
