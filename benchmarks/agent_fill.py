"""The fill through the backend agent (500 Nodes × 8 GPUs, 4,000 one-GPU jobs, REST → every
pod Running) on a real kube-apiserver, against the API server's floor in the same run.

The product as a user starts it: ``osmo standalone`` (the embedded ``default`` untouched), a
``kubernetes`` backend row (``placement: osmo``) that the pool ``bench`` names, ``osmo
backend-agent`` with a token of a user in ``osmo-backend-NAME`` and the agent's RBAC of
``deploy/kubernetes/agent`` and ``deploy/kubernetes/placement-osmo``; our placement core
binds the pods inside the agent, next to its informer cache.
The submissions by ``--clients`` REST clients; the kubelet stand-in of ``k8s_fill.py`` marks
the bound pods Running. The floor is ``k8s_fill.py``'s: bare clients in processes of their own
writing the objects the product wrote and binding each pod, at each ``--floor-processes``
count, the best taken. The pair runs ``--runs`` times alternating (A B, B A, ...); a target
(≤ 1.3 × the floor) is judged on the median ratio.

Before any time it checks: every submission accepted, every pod there once, bound once (the
API server's binding count) and Running, no node over its allocatable, every task RUNNING.

    python benchmarks/agent_fill.py [--nodes 500] [--workflows 4000] [--clients 8]
                                    [--runs 3] [--floor-processes 2,4,8] [--floor-threads 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import describe_spread, spread  # noqa: E402
from benchmarks.end_to_end import SPEC  # noqa: E402 - the same one-GPU workflow
from benchmarks.k8s_fill import (  # noqa: E402 - the fill's harness and its floor
    NAMESPACE,
    Admin,
    Kubelet,
    _bindings,
    _clean,
    _counts,
    _settle,
    _template,
    api_requests,
    delta,
    floor_phase,
    placement_server,
    report,
    verify,
)
from benchmarks.standalone import Standalone  # noqa: E402

BACKEND = "bench-agent"
TARGET = 1.3


def _start_agent(server, standalone: Standalone, run_dir: Path, log: Path):
    """The backend row, the pool on it, the agent's user and token; ``osmo backend-agent``
    (which places the pods itself: ``placement: osmo``)."""
    from django.db import connections

    from osmo.accounts import services as accounts
    from pools import services as pools
    from scheduler.backends import services as backends
    from tests.kube_real.agent import agent_kubeconfig

    backends.backend_upsert(name=BACKEND, kind="kubernetes", placement="osmo",
                            k8s_namespace=NAMESPACE)
    pools.pool_upsert(actor=None, name="bench", quota_gpus=10**6, backends=[BACKEND])
    user = accounts.user_ensure(username="bench-agent", groups=[f"osmo-backend-{BACKEND}"])
    token = accounts.token_issue(user=user)
    connections.close_all()
    kubeconfig = agent_kubeconfig(server, run_dir / "agent.kubeconfig")
    out = log.open("ab")
    # The agent from this checkout, as the service (`python -m` from ROOT): the venv's `osmo`
    # script alone imports whichever checkout the venv was installed from.
    env = {**{k: v for k, v in standalone.env.items() if k not in ("DATABASE_URL",)},
           "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "osmo"), "backend-agent", "--url", standalone.base,
         "--token", token, "--name", BACKEND, "--kubeconfig", str(kubeconfig)],
        env=env, cwd=str(ROOT), stdout=out, stderr=out)


def product_phase(server, admin: Admin, args, data_dir: Path) -> dict:
    standalone = Standalone(data_dir)
    standalone.start()
    standalone.join_database()
    from scheduler.models import Node
    from workflows.models import Task

    bench_token = standalone.bench_token("bench", args.nodes * 8)
    agent = _start_agent(server, standalone, data_dir, data_dir / "agent.log")
    kubelet = None
    try:
        deadline = time.monotonic() + args.limit
        while Node.objects.filter(backend=BACKEND).count() < args.nodes:
            if time.monotonic() > deadline or agent.poll() is not None:
                raise SystemExit("[product-agent] FAILED, no time printed: the agent did not "
                                 f"mirror the Nodes (see {data_dir}/agent.log)")
            time.sleep(0.1)
        kubelet = Kubelet(admin, NAMESPACE).start()
        base, headers = standalone.base, {"Authorization": f"Bearer {bench_token}"}
        before = api_requests(admin)
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

        start = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        submitted = all_running = tasks_running = None
        while time.perf_counter() - start < args.limit and not (failures or kubelet.problems()):
            now = time.perf_counter() - start
            if submitted is None and not any(t.is_alive() for t in threads):
                submitted = now
            if all_running is None and submitted and len(kubelet.running) >= args.workflows:
                all_running = now
            if all_running is not None and Task.objects.filter(
                    status="RUNNING").count() >= args.workflows:
                tasks_running = time.perf_counter() - start
                break
            time.sleep(0.2)
        for thread in threads:
            thread.join()
        requests = delta(api_requests(admin), before)
        problems = [f"{len(failures)} of {args.workflows} submissions failed (HTTP "
                    f"{sorted(Counter(failures).items())})"] if failures else []
        problems += kubelet.problems()
        if all_running is None or tasks_running is None:
            problems.append(f"not every pod Running and task RUNNING within {args.limit:g} s")
        if _bindings(requests) != args.workflows:
            problems.append(f"{_bindings(requests)} bindings for {args.workflows} pods")
        problems += verify(admin, count=args.workflows, running=True)
        report("product-agent", problems)
        templates = [_template(o, "scheduling.run.ai/v2alpha2", "PodGroup") for o in admin.call(
            "GET", f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups")[
            "items"]] + [_template(o, "v1", "Pod") for o in admin.call(
                "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]]
        return {"time": all_running, "submitted": submitted, "tasks_running": tasks_running,
                "requests": requests, "templates": templates}
    finally:
        if kubelet is not None:
            kubelet.stop()
        if agent.poll() is None:
            agent.terminate()
            try:
                agent.wait(30)
            except subprocess.TimeoutExpired:
                agent.kill()
        standalone.stop()


def fill(server, admin: Admin, args, run_dir: Path) -> None:
    nodes = admin.nodes(args.nodes)
    print(f"[agent-fill] {args.nodes} Nodes × 8 GPUs; {args.workflows} one-GPU jobs, "
          f"{args.clients} clients, {args.runs} run(s) of each; load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    runs: dict[str, list[dict]] = {"product": [], "floor": []}
    templates: list[dict] = []
    order = ("product", "floor")
    for round_ in range(args.runs):
        for phase in order if round_ % 2 == 0 else order[::-1]:
            if phase == "product":  # first in the first round: the floor writes its objects
                figures = product_phase(server, admin, args, run_dir / f"osmo-{round_ + 1}")
                templates = templates or figures["templates"]
            else:
                figures = floor_phase(server, admin, args, templates, nodes)
            runs[phase].append(figures)
            _clean(admin)
            _settle(server)
    product, floor = runs["product"], runs["floor"]
    ratios = [a["time"] / b["time"] for a, b in zip(product, floor, strict=True)]
    print(f"\n[agent-fill] results of {len(product)} run(s) (checked above; load now "
          f"{os.getloadavg()[0]:.1f}):")
    print(f"  product through the agent, REST → all Running: {_times(product, 'time')} s — "
          f"{describe_spread([p['time'] for p in product], ' s')}; every task RUNNING "
          f"{_times(product, 'tasks_running')} s")
    print(f"  floor, bare clients writing the same objects, best client count: "
          f"{_times(floor, 'time')} s — {describe_spread([f['time'] for f in floor], ' s')}")
    for index, figures in enumerate(product, 1):
        requests = figures["requests"]
        print(f"  API server requests, product run {index}: {sum(requests.values())} — "
              + ", ".join(f"{k} {v}" for k, v in requests.most_common(6)))
    ratio = spread(ratios)[0]
    print(f"  through the agent / floor: {describe_spread(ratios, digits=2)} (target ≤ "
          f"{TARGET} on the median: {'met' if ratio <= TARGET else 'NOT met'})")


def _times(runs: list[dict], key: str) -> str:
    return " / ".join(f"{figures[key]:.1f}" for figures in runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--workflows", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--limit", type=float, default=600.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--floor-processes", type=_counts, default=[2, 4, 8])
    parser.add_argument("--floor-threads", type=int, default=4)
    args = parser.parse_args()
    from osmo import process_gc

    process_gc.settle(busy=True)
    from tests.kube_real.agent import install_agent_rbac

    with placement_server("osmo-agent-fill-") as (server, run_dir):
        install_agent_rbac(server, NAMESPACE)
        fill(server, Admin(server.kubeconfig), args, run_dir)


if __name__ == "__main__":
    main()
