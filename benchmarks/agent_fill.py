"""The fill through the backend agent (500 Nodes × 8 GPUs, 4,000 one-GPU jobs, REST → every
pod Running) on a real kube-apiserver, against the API server's floor in the same run; with
``--servers 2``, through two agents on two real kube-apiservers (250 Nodes each by default)
against the two servers' floor.

The product as a user starts it: ``osmo standalone`` (the embedded ``default`` untouched), per
API server a ``kubernetes`` backend row (``placement: osmo``) and ``osmo backend-agent`` with
a token of a user in ``osmo-backend-NAME`` and the agent's RBAC of ``deploy/kubernetes/agent``
and ``deploy/kubernetes/placement-osmo`` (the clusters of ``fleet_recovery.py``); ONE pool
``bench`` names every backend, so the fleet pass chooses each job's server. Our placement core
binds the pods inside each agent, next to its informer cache. The submissions by
``--clients`` REST clients; a kubelet stand-in of ``k8s_fill.py`` per server marks the bound
pods Running. Timed: the first submission → every pod Running on every server. The floor is
``k8s_fill.py``'s: bare clients in processes of their own writing the objects the product
wrote (to the server it wrote each to: the product's split) and binding each pod, at each
``--floor-processes`` count (per server, every server's clients at once), the best taken. The
pair runs ``--runs`` times alternating (A B, B A, ...); the floor writes the last product
run's objects; a target (≤ 1.3 × the floor) is judged on the median ratio.

Before any time it checks: every submission accepted; every pod there once over all servers
(no job on two), bound once (each server's binding count) and Running, no node over its
allocatable; each server's pods those of the jobs the database sent there, and every server
a share; every task RUNNING.

    python benchmarks/agent_fill.py [--servers 1] [--nodes 500 / servers] [--workflows 4000]
                                    [--clients 8] [--runs 3] [--floor-processes 2,4,8]
                                    [--floor-threads 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import describe_spread, spread  # noqa: E402
from benchmarks.end_to_end import SPEC  # noqa: E402 - the same one-GPU workflow
from benchmarks.fleet_recovery import Cluster  # noqa: E402 - a real API server with an agent
from benchmarks.k8s_fill import (  # noqa: E402 - the fill's harness and its floor
    NAMESPACE,
    Kubelet,
    _bindings,
    _clean,
    _counts,
    _settle,
    _template,
    api_requests,
    delta,
    floor_jobs,
    floor_phase,
    report,
    verify,
)
from benchmarks.standalone import Standalone  # noqa: E402

TARGET = 1.3
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
PODGROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups"


def _job(pod: dict) -> tuple:
    annotations = pod["metadata"].get("annotations") or {}
    return tuple(annotations.get(key) for key in (
        "osmo/workflow-name", "osmo/task-name", "osmo/replica-index"))


def split_problems(clusters: list[Cluster], pods: dict[str, list[dict]], chosen: Counter,
                   workflows: int) -> list[str]:
    """Over the servers: every job's pod on exactly one, each server holding as many as the
    database sent it, and every server a share."""
    jobs = Counter(_job(pod) for cluster in clusters for pod in pods[cluster.name])
    twice = [job for job, servers in jobs.items() if servers > 1]
    problems = [f"jobs with more than one pod over the servers: {twice[:5]}"] if twice else []
    if len(jobs) != workflows:
        problems.append(f"{len(jobs)} jobs' pods over the servers, expected {workflows}")
    for cluster in clusters:
        if len(pods[cluster.name]) != chosen[cluster.name]:
            problems.append(f"{cluster.name}: {len(pods[cluster.name])} pods, the database "
                            f"sent {chosen[cluster.name]} groups there")
        if len(clusters) > 1 and not pods[cluster.name]:
            problems.append(f"{cluster.name} got no share of the jobs")
    return problems


def _each_running_once(kubelets: list[Kubelet], jobs: int) -> bool:
    """Every job's pod Running, on one server only (a moved job's old pod stopped)."""
    running = [name for kubelet in kubelets for name in kubelet.live]
    return len(running) == len(set(running)) >= jobs


def product_phase(clusters: list[Cluster], args, data_dir: Path) -> dict:
    standalone = Standalone(data_dir)
    standalone.start()
    standalone.join_database()
    from osmo.accounts import services as accounts
    from scheduler.backends import services as backends
    from scheduler.models import Node
    from workflows.models import Task, WorkflowGroup

    names = [cluster.name for cluster in clusters]
    for name in names:
        backends.backend_upsert(name=name, kind="kubernetes", placement="osmo",
                                k8s_namespace=NAMESPACE)
    tokens = {name: accounts.token_issue(user=accounts.user_ensure(
        username=f"agent-{name}", groups=[f"osmo-backend-{name}"])) for name in names}
    bench_token = standalone.bench_token("bench", 10**6, backends=names)  # closes connections
    kubelets: list[Kubelet] = []
    try:
        for cluster in clusters:
            cluster.start_agent(standalone, tokens[cluster.name])
        deadline = time.monotonic() + args.limit
        while Node.objects.filter(backend__in=names).count() < args.nodes * len(clusters):
            if time.monotonic() > deadline or any(c.agent.poll() is not None for c in clusters):
                raise SystemExit("[product-agent] FAILED, no time printed: the agents did not "
                                 f"mirror the Nodes (see {data_dir.parent}/*/agent.log)")
            time.sleep(0.1)
        kubelets = [Kubelet(cluster.admin, NAMESPACE).start() for cluster in clusters]
        base, headers = standalone.base, {"Authorization": f"Bearer {bench_token}"}
        before = [api_requests(cluster.admin) for cluster in clusters]
        bound_before = [api_requests(cluster.admin, succeeded=True) for cluster in clusters]
        remaining = iter(range(args.workflows))
        lock = threading.Lock()
        failures: list[int] = []

        def client() -> None:
            with httpx.Client(timeout=120) as http:
                while True:
                    with lock:
                        if next(remaining, None) is None:
                            return
                    response = http.post(f"{base}/api/pool/bench/workflow", headers=headers,
                                         json={"file": SPEC})
                    if response.status_code != 201:
                        failures.append(response.status_code)

        def kubelet_problems() -> list[str]:
            return [problem for kubelet in kubelets for problem in kubelet.problems()]

        start = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        submitted = all_running = tasks_running = None
        while time.perf_counter() - start < args.limit and not (failures or kubelet_problems()):
            now = time.perf_counter() - start
            if submitted is None and not any(t.is_alive() for t in threads):
                submitted = now
            if all_running is None and submitted and _each_running_once(
                    kubelets, args.workflows):
                all_running = now
            if all_running is not None and Task.objects.filter(
                    status="RUNNING").count() >= args.workflows:
                tasks_running = time.perf_counter() - start
                break
            time.sleep(0.2)
        for thread in threads:
            thread.join()
        requests = [delta(api_requests(cluster.admin), earlier)
                    for cluster, earlier in zip(clusters, before, strict=True)]
        bindings = [_bindings(delta(api_requests(cluster.admin, succeeded=True), earlier))
                    for cluster, earlier in zip(clusters, bound_before, strict=True)]
        problems = [f"{len(failures)} of {args.workflows} submissions failed (HTTP "
                    f"{sorted(Counter(failures).items())})"] if failures else []
        problems += kubelet_problems()
        if all_running is None or tasks_running is None:
            problems.append(f"not every pod Running and task RUNNING within {args.limit:g} s")
        pods = {c.name: c.admin.call("GET", PODS)["items"] for c in clusters}
        for cluster, kubelet, bound in zip(clusters, kubelets, bindings, strict=True):
            count = len(pods[cluster.name])
            if bound != len(kubelet.bound_pods):  # with the pods a move deleted there
                problems.append(f"{cluster.name}: {bound} bindings for "
                                f"{len(kubelet.bound_pods)} pods bound there")
            problems += [f"{cluster.name}: {problem}" for problem in verify(
                cluster.admin, count=count, running=True)]
        chosen = Counter(WorkflowGroup.objects.values_list("backend", flat=True))
        moved = WorkflowGroup.objects.exclude(backend_moved_at=None).count()
        problems += split_problems(clusters, pods, chosen, args.workflows)
        report("product-agent", problems)
        templates = {c.name: [_template(o, "scheduling.run.ai/v2alpha2", "PodGroup")
                              for o in c.admin.call("GET", PODGROUPS)["items"]]
                     + [_template(o, "v1", "Pod") for o in pods[c.name]] for c in clusters}
        return {"time": all_running, "submitted": submitted, "tasks_running": tasks_running,
                "requests": requests, "templates": templates,
                "split": {name: len(pods[name]) for name in names}, "moved": moved,
                "stopped": sum(len(k.bound_pods) for k in kubelets) - args.workflows,
                "refused": sum(_bindings(r) for r in requests) - sum(bindings)}
    finally:
        for kubelet in kubelets:
            kubelet.stop()
        for cluster in clusters:
            cluster.stop_agent()
        standalone.stop()


def fill(clusters: list[Cluster], args, run_dir: Path) -> None:
    print(f"[agent-fill] {len(clusters)} API server(s) × {args.nodes} Nodes × 8 GPUs; "
          f"{args.workflows} one-GPU jobs, {args.clients} clients, {args.runs} run(s) of each; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    runs: dict[str, list[dict]] = {"product": [], "floor": []}
    templates: dict[str, list[dict]] = {}
    order = ("product", "floor")
    for round_ in range(args.runs):
        for phase in order if round_ % 2 == 0 else order[::-1]:
            if phase == "product":  # first in the first round: the floor writes its objects
                figures = product_phase(clusters, args, run_dir / f"osmo-{round_ + 1}")
                templates = figures["templates"]
            else:
                figures = floor_phase(args, *[(c.server, c.admin, floor_jobs(
                    templates[c.name], c.nodes)) for c in clusters])
                figures["split"] = {name: sum(o["kind"] == "Pod" for o in objects)
                                    for name, objects in templates.items()}
            runs[phase].append(figures)
            for cluster in clusters:
                _clean(cluster.admin)
                _settle(cluster.server)
    product, floor = runs["product"], runs["floor"]
    ratios = [a["time"] / b["time"] for a, b in zip(product, floor, strict=True)]
    print(f"\n[agent-fill] results of {len(product)} run(s) (checked above; load now "
          f"{os.getloadavg()[0]:.1f}):")
    print(f"  product through the agent{'s' if len(clusters) > 1 else ''}, REST → all Running: "
          f"{_times(product, 'time')} s — {describe_spread([p['time'] for p in product], ' s')}"
          f"; every task RUNNING {_times(product, 'tasks_running')} s")
    print(f"  floor, bare clients writing the same objects, best client count: "
          f"{_times(floor, 'time')} s — {describe_spread([f['time'] for f in floor], ' s')}")
    for label, figures_of in (("product", product), ("floor", floor)):
        for index, figures in enumerate(figures_of, 1):
            counts = "" if label == "product" else "; " + ", ".join(
                f"{count} processes {seconds:.1f} s"
                for count, seconds in figures["by_count"].items())
            moves = "" if label == "floor" else (
                f"; {figures['moved']} groups moved between servers by the fleet pass, "
                f"{figures['stopped']} bound pods deleted by a move, {figures['refused']} "
                f"bindings refused")
            print(f"  {label} run {index}, jobs per server: " + ", ".join(
                f"{name} {count}" for name, count in figures["split"].items()) + counts
                  + moves)
    for index, figures in enumerate(product, 1):
        for cluster, requests in zip(clusters, figures["requests"], strict=True):
            print(f"  API server requests, product run {index}, {cluster.name}: "
                  f"{sum(requests.values())} — "
                  + ", ".join(f"{k} {v}" for k, v in requests.most_common(6)))
    ratio = spread(ratios)[0]
    print(f"  through the agent / floor: {describe_spread(ratios, digits=2)} (target ≤ "
          f"{TARGET} on the median: {'met' if ratio <= TARGET else 'NOT met'})")


def _times(runs: list[dict], key: str) -> str:
    return " / ".join(f"{figures[key]:.1f}" for figures in runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=1, help="API servers, an agent each")
    parser.add_argument("--nodes", type=int, default=0, help="per server (0: 500 / servers)")
    parser.add_argument("--workflows", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--limit", type=float, default=600.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--floor-processes", type=_counts, default=[2, 4, 8],
                        help="per server")
    parser.add_argument("--floor-threads", type=int, default=4)
    args = parser.parse_args()
    args.nodes = args.nodes or 500 // args.servers
    from osmo import process_gc
    from tests.kube_real.server import unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason)
    process_gc.settle(busy=True)
    run_dir = Path(tempfile.mkdtemp(prefix="osmo-agent-fill-"))
    clusters = [Cluster(f"bench-{index + 1}", run_dir, args.nodes)
                for index in range(args.servers)]
    try:
        for cluster in clusters:
            cluster.start(placement=True)
        fill(clusters, args, run_dir)
    finally:
        for cluster in clusters:
            cluster.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
