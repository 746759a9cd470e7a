"""The benchmarks check their result before they print a time: a wrong plan or a wrong cluster
state ends the run with the problems, and no figure."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter

import pytest

from benchmarks import k8s_fill
from benchmarks import scheduler as bench
from scheduler.core import run_cycle
from scheduler.core.results import Binding


def sound(snapshot):
    return run_cycle(snapshot)


def test_a_sound_plan_passes() -> None:
    snapshot = bench.single_gpu_jobs(2, 16)
    assert bench.check(snapshot, sound(snapshot), bound=16) == []
    snapshot = bench.reclaim(4, 2)
    assert bench.check(snapshot, sound(snapshot), bound=2, evicted=4) == []
    snapshot = bench.kai_sizes(3, 10)
    assert bench.check(snapshot, sound(snapshot)) == []  # no fixed count: nothing left out


def test_a_pod_bound_twice_or_beyond_a_node_is_caught() -> None:
    snapshot = bench.single_gpu_jobs(2, 16)
    result = sound(snapshot)
    twice = dataclasses.replace(result, bindings=result.bindings + result.bindings[:1])
    assert "1 pods bound more than once" in bench.check(snapshot, twice, bound=17)
    piled = dataclasses.replace(result, bindings=tuple(
        Binding(b.pod, b.gang, "node-00000") for b in result.bindings))
    assert any(p.startswith("node node-00000 holds [16, ") for p in bench.check(
        snapshot, piled, bound=16))


def test_wrong_counts_and_work_left_out_are_caught() -> None:
    snapshot = bench.single_gpu_jobs(2, 16)
    short = dataclasses.replace(sound(snapshot), bindings=sound(snapshot).bindings[1:])
    assert bench.check(snapshot, short, bound=16) == [
        "bound/evicted/moved (15, 0, 0), expected (16, 0, 0)"]
    (problem,) = bench.check(snapshot, short)
    assert problem.endswith("was left out but fits what stays free")


def test_measure_prints_no_time_for_a_wrong_plan(monkeypatch, capsys) -> None:
    snapshot = bench.single_gpu_jobs(2, 16)
    result = sound(snapshot)
    monkeypatch.setattr(bench, "run_cycle", lambda _snapshot: dataclasses.replace(
        result, bindings=result.bindings[1:]))
    with pytest.raises(SystemExit, match="the cycle's plan is wrong, no time printed"):
        bench.measure("broken", snapshot, 1, bound=16)
    assert capsys.readouterr().out == ""


class FakeAdmin:
    def __init__(self, pods, nodes):
        self.pods, self.nodes = pods, nodes

    def call(self, method, path, *args, **kwargs):
        return {"items": self.pods if path.endswith("/pods") else self.nodes}


def fill_pod(name: str, node: str | None, *, task: str | None = None, gpus: int = 1) -> dict:
    return {"metadata": {"name": name, "namespace": k8s_fill.NAMESPACE, "annotations": {
                "osmo/workflow-name": task or name, "osmo/task-name": "main"}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {
                "requests": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Running" if node else "Pending"}}


NODES = [{"metadata": {"name": "node-000"},
          "status": {"allocatable": {"nvidia.com/gpu": "2", "pods": "110"}}}]


def test_the_fill_check_catches_missing_doubled_unbound_and_overcommitted_pods() -> None:
    good = [fill_pod("a", "node-000"), fill_pod("b", "node-000")]
    assert k8s_fill.verify(FakeAdmin(good, NODES), count=2, running=True) == []
    problems = k8s_fill.verify(FakeAdmin(good, NODES), count=3)
    assert problems == ["2 pods, expected 3"]
    doubled = good + [fill_pod("a-again", "node-000", task="a")]
    assert k8s_fill.verify(FakeAdmin(doubled, NODES), count=3) == [
        "tasks with more than one pod: [('a', 'main', None)]",
        "node node-000: nvidia.com/gpu requested 3 > allocatable 2"]
    waiting = [fill_pod("a", "node-000"), fill_pod("c", None)]
    assert k8s_fill.verify(FakeAdmin(waiting, NODES), count=2, running=True) == [
        "1 pods not bound: ['c']", "1 pods not Running: ['c']"]
    with pytest.raises(SystemExit, match=r"\[fill\] FAILED, no time printed: 1 pods not bound"):
        k8s_fill.report("fill", ["1 pods not bound: ['c']"])


def test_the_scheduler_benchmark_runs_and_checks_every_figure(tmp_path) -> None:
    """The quick sizes end to end, snapshot builders included (on its own throwaway
    PostgreSQL, as a user runs it): a moved module once broke the full run at its end."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "benchmarks/scheduler.py", "--quick"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert "(KAI" not in done.stdout  # KAI is not run here: no KAI time beside ours
    assert len(lines) == 10 and all(line.rstrip().endswith("checked") or "checked " in line
                                   for line in lines), done.stdout


def fill_figures(seconds: float, **more) -> dict:
    return {"time": seconds, "requests": Counter({"POST pods/binding": 4}),
            "cpu": (Counter({"API server": 1.0}), seconds), **more}


def product_figures(seconds: float) -> dict:
    return fill_figures(
        seconds, start=0.0, submit_times=[0.01, 0.02, 0.03, 0.04], submitted=seconds / 2,
        created=[0.1, seconds - 0.2], bound=[0.2, seconds - 0.1], running=[0.3, seconds],
        created_to_bound=0.05, tasks_running=seconds,
        cycle={"cycles": 3, "bound_total": 4, "api_calls_total": {"bind": 4},
               "time_total_ms": {"decide": 1.0}})


def test_the_fill_reports_the_median_and_range_of_its_alternating_runs(capsys) -> None:
    """Each pair runs in alternating order; every run's figure is printed, then the median and
    the min–max of each side and of the ratio with N stated, a target judged on the median
    ratio; the floor's time is its best client count, each count's time shown."""
    args = argparse.Namespace(workflows=4)
    ours = [fill_figures(t, first=0.5, calls={"bind": 4}, bound_total=4)
            for t in (8.0, 6.0, 7.0)]
    floor = [fill_figures(20.0, processes=4, by_count={2: 26.0, 4: 20.0, 8: 20.5}),
             fill_figures(20.0, processes=8, by_count={2: 25.0, 4: 21.0, 8: 20.0}),
             fill_figures(25.0, processes=4, by_count={2: 30.0, 4: 25.0, 8: 25.5})]
    k8s_fill.print_fill(args, product=[product_figures(t) for t in (24.0, 30.0, 30.0)],
                        floor=floor, kube=[fill_figures(t) for t in (12.0, 9.0, 14.0)],
                        ours=ours)
    out = capsys.readouterr().out
    assert "results of 3 alternating run(s)" in out
    assert ("(1) product, REST → all Running: 24.0 / 30.0 / 30.0 s — median 30.0 s (min–max "
            "24.0–30.0 s, 3 runs)") in out
    assert "best client count: 20.0 / 20.0 / 25.0 s — median 20.0 s (min–max 20.0–25.0 s" in out
    assert "run 1: 2 processes 26.0 s, 4 processes 20.0 s, 8 processes 20.5 s; best 4" in out
    assert ("product / floor: median 1.20 (min–max 1.20–1.50, 3 runs); by run 1.20 / 1.50 / "
            "1.20 (target ≤ 1.3 on the median: met)") in out
    assert ("binding rate / kube-scheduler's: median 1.50 (min–max 1.50–2.00, 3 runs); by run "
            "1.50 / 1.50 / 2.00 (target ≥ 1.5 on the median: met)") in out
    assert "(target ≤ 1.05: met)" in out
    assert out.count("where the product's time goes, run") == 3
    # (4) is named for what it is: the loop without publish_cycle's work, not the backend
    assert "(4) our placement core without the cycle's bookkeeping, start → last binding" in out
    assert "our scheduler" not in out


def test_the_scheduler_alone_says_what_it_leaves_out() -> None:
    from benchmarks import scheduler_alone

    doc = " ".join(scheduler_alone.__doc__.split())
    assert doc.startswith("Phase (4) of ``k8s_fill.py``'s fill, in a process of its own: the "
                          "placement core without the cycle's bookkeeping.")
    assert ("leaving out ``runner.publish_cycle``'s per-cycle work (the cycle record, the "
            "pending gangs, the queue figures, the metrics and the first-bind query), and it "
            "runs without a database and at WARNING logs") in doc


def test_the_floor_takes_its_best_client_count() -> None:
    from benchmarks import checks

    assert checks.best_floor({2: 30.0, 4: 24.0, 8: 24.5}) == (4, 24.0)
    with pytest.raises(ValueError):
        checks.best_floor({})


# --- the shared checks (benchmarks/checks.py) and the benchmarks that use them ------------------

def test_a_fill_with_a_refused_submission_or_a_timeout_is_a_failure() -> None:
    from benchmarks import checks

    assert checks.fill_problems(workflows=4, failures=[], running=4, submitted=1.0, limit=60,
                                timed_out=False) == []
    assert checks.fill_problems(workflows=4, failures=[503, 503], running=2, submitted=1.0,
                                limit=60, timed_out=False) == [
        "2 of 4 submissions failed (HTTP [(503, 2)])", "2 of 4 workflows RUNNING after 60 s"]
    assert checks.fill_problems(workflows=4, failures=[], running=4, submitted=None, limit=60,
                                timed_out=True) == [
        "the submissions did not end within 60 s", "4 of 4 workflows RUNNING after 60 s"]
    with pytest.raises(SystemExit, match=r"^\[end to end\] FAILED, no figure printed: 3 of 4"):
        checks.fail_on("end to end", ["3 of 4 workflows RUNNING after 60 s"])
    checks.fail_on("end to end", [])  # nothing wrong: the run goes on


def quality_instance():
    from scheduler.core.model import Gang, Node, Pod, Queue, Snapshot

    nodes = (Node("n0", gpus=8, cpu=8000), Node("n1", gpus=4, cpu=8000))
    gangs = (Gang("g0", "team", created_at=0.0, min_member=2,
                  pods=(Pod("g0-0", gpus=4, cpu=1000), Pod("g0-1", gpus=4, cpu=1000))),
             Gang("g1", "team", created_at=1.0, min_member=1,
                  pods=(Pod("g1-0", gpus=4, cpu=1000),)))
    return Snapshot(nodes, (Queue("root"), Queue("team", parent="root")), gangs)


def test_an_infeasible_plan_is_rejected() -> None:
    from benchmarks import checks, placement_quality

    snapshot = quality_instance()
    good = [Binding("g0-0", "g0", "n0"), Binding("g0-1", "g0", "n0"), Binding("g1-0", "g1", "n1")]
    assert checks.plan_problems(snapshot.nodes, snapshot.gangs, good) == []
    over = [Binding("g0-0", "g0", "n1"), Binding("g0-1", "g0", "n1")]
    assert checks.plan_problems(snapshot.nodes, snapshot.gangs, over) == [
        "n1 over its capacity: 8/4 GPUs, 2000/8000 CPU"]
    partial = [Binding("g0-0", "g0", "n0")]
    assert checks.plan_problems(snapshot.nodes, snapshot.gangs, partial) == [
        "gang g0 partly placed: 1 of 2"]
    twice = [Binding("g1-0", "g1", "n0"), Binding("g1-0", "g1", "n1")]
    assert checks.plan_problems(snapshot.nodes, snapshot.gangs, twice) == ["g1-0 bound twice"]
    result = dataclasses.replace(run_cycle(snapshot), bindings=tuple(over))
    with pytest.raises(ValueError, match="infeasible plan: n1 over its capacity"):
        placement_quality.ratio(snapshot, result, 12)
    sound_result = run_cycle(snapshot)
    assert placement_quality.ratio(snapshot, sound_result, placement_quality.optimum(
        snapshot)) == 1.0


def test_a_failed_solver_run_is_not_scored() -> None:
    from benchmarks import placement_quality

    def failing(*_args, **_kwargs):
        return argparse.Namespace(success=False, fun=None, message="time limit reached")

    snapshot = quality_instance()
    assert placement_quality.optimum(snapshot) == 12
    with pytest.raises(placement_quality.SolverFailed, match="time limit reached"):
        placement_quality.optimum(snapshot, solve=failing)
    with pytest.raises(ValueError, match="more than the optimum 4"):
        placement_quality.ratio(snapshot, run_cycle(snapshot), 4)


def test_runs_are_reported_by_their_median_and_range() -> None:
    from benchmarks import checks

    assert checks.spread([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert checks.describe_spread([60.0, 70.5, 65.0], " s") == (
        "median 65.0 s (min–max 60.0–70.5 s, 3 runs)")
    assert checks.best_floor({2: 50.0, 4: 41.0, 8: 41.0}) == (4, 41.0)
    with pytest.raises(ValueError):
        checks.spread([])


def test_small_jobs_that_never_started_count_in_the_wait() -> None:
    from benchmarks import checks

    jobs = [(0.0, 1.0, 5.0, "COMPLETED"),  # before the gang: left out
            (10.0, 12.0, None, "RUNNING"), (11.0, None, None, "WAITING"),
            (12.0, None, None, "WAITING")]
    assert checks.waits_since(jobs, since=10.0, until=40.0) == ([2.0, 29.0, 28.0], 2)


def test_a_peer_not_run_is_named_with_its_source_and_date_never_as_a_figure() -> None:
    import re

    from benchmarks import gang_start

    assert "not run here" in gang_start.SLURM
    assert re.search(r"commit [0-9a-f]{7} \(\d{4}-\d\d-\d\d\)", gang_start.SLURM)
