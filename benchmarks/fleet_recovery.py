"""Fleet recovery (issue 46): the time from the end of a lost cluster's lease until the gangs
that waited there run on another cluster, on two real kube-apiservers.

The product as a user starts it: ``osmo standalone`` (its embedded ``default`` untouched), two
``kubernetes`` backends (``placement: osmo``), ``east`` with ``--nodes`` × 2 and ``west``
with ``--nodes`` Nodes of 8 GPUs, both named by the pool ``bench``, each served by ``osmo
backend-agent`` with a token of a user in ``osmo-backend-NAME``. West's pods are bound by our
placement core inside its agent and marked Running by the kubelet stand-in of
``k8s_fill.py``; east's agent has no RBAC to bind pods, so the gangs sent there wait (as gangs
wait behind a busy cluster). ``--gangs`` workflows of the mixed stream of
``fleet_dispatch.py`` (fewer when they would ask more than half of west's GPUs) are submitted
over REST; east, the cluster with the most free GPUs, is
chosen for them. Once every gang's pods are on east, east's agent is SIGKILLed and its API
server stopped. Timed: from east's lease end (its last heartbeat + ``OSMO_BACKEND_LEASE``, the
default unless ``--lease``) until every one of east's gangs has every pod Running on west.
Then east's API server and agent come back, and the time until east holds 0 pods and 0
PodGroups of the moved gangs (the fence) is printed too.

Before any time it checks: every submission accepted; every gang chosen east at first and
west in the end; on west every pod there once, bound once (the API server's binding count)
and Running, no node over its allocatable; every task RUNNING; east empty after its return.

The peers cannot run here (their control planes are not on PyPI, Debian or npm), so their
documented defaults are printed beside the figure, with their sources.

    python benchmarks/fleet_recovery.py [--gangs 60] [--nodes 64] [--runs 3] [--lease S]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import describe_spread, fail_on  # noqa: E402
from benchmarks.fleet_dispatch import shapes, spec  # noqa: E402 - the same mixed stream
from benchmarks.k8s_fill import (  # noqa: E402 - the fill's harness
    NAMESPACE,
    Admin,
    Kubelet,
    _bindings,
    api_requests,
    delta,
    verify,
)
from benchmarks.standalone import Standalone  # noqa: E402

PODGROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
PEERS = (
    "Kueue MultiKueue: a lost worker's workloads are dispatched again after workerLostTimeout, "
    "15 min by default (kubernetes-sigs/kueue #1681)",
    "Armada: a silent cluster's jobs fail after 10 min; gangs are not requeued",
    "NVIDIA OSMO: the backend's pools go OFFLINE after 2 min; nothing moves until it returns",
)


class Cluster:
    """One real kube-apiserver with the agent's RBAC (and the placement's, for ``west``)."""

    def __init__(self, name: str, run_dir: Path, nodes: int):
        from tests.kube_real.server import ApiServer

        self.name, self.run_dir = name, run_dir / name
        self.run_dir.mkdir(parents=True)
        self.server = ApiServer(self.run_dir)
        self.nodes = [f"{name}-{i:03d}" for i in range(nodes)]
        self.agent: subprocess.Popen | None = None

    def start(self, placement: bool) -> Cluster:
        from tests.kube_real.agent import install_agent_rbac
        from tests.kube_real.server import DEPLOY, load_documents

        self.server.start()
        install_agent_rbac(self.server, NAMESPACE)
        if placement:
            for doc in load_documents(DEPLOY / "placement-osmo" / "rbac.yaml"):
                if doc["kind"] in ("Role", "RoleBinding"):
                    doc["metadata"]["namespace"] = NAMESPACE
                self.server.create(doc, exist_ok=True)
        self.admin = Admin(self.server.kubeconfig)
        self.admin.parallel([lambda name=name: self.admin.add_node(name, 8, {})
                             for name in self.nodes])
        return self

    def names(self, path: str) -> set[str]:
        return {o["metadata"]["name"] for o in self.admin.call("GET", path)["items"]}

    def start_agent(self, standalone: Standalone, token: str) -> None:
        from tests.kube_real.agent import agent_kubeconfig

        kubeconfig = agent_kubeconfig(self.server, self.run_dir / "agent.kubeconfig")
        log = (self.run_dir / "agent.log").open("ab")
        env = {k: v for k, v in standalone.env.items() if k != "DATABASE_URL"}
        self.agent = subprocess.Popen(
            [str(Path(sys.executable).parent / "osmo"), "backend-agent", "--url",
             standalone.base, "--token", token, "--name", self.name, "--kubeconfig",
             str(kubeconfig)], env=env, cwd=str(ROOT), stdout=log, stderr=log,
            start_new_session=True)

    def stop_agent(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(30)
            except subprocess.TimeoutExpired:
                self.agent.kill()

    def stop(self) -> None:
        self.stop_agent()
        self.server.stop()


def _until(done, limit: float, what: str, *clusters: Cluster) -> float:
    """Wait for ``done()``; the wall time it took. A dead agent or a timeout ends the run."""
    start = time.monotonic()
    while not done():
        for cluster in clusters:
            if cluster.agent is not None and cluster.agent.poll() is not None:
                fail_on("fleet-recovery", [f"{cluster.name}'s agent exited (see "
                                           f"{cluster.run_dir}/agent.log) waiting for {what}"])
        if time.monotonic() - start > limit:
            fail_on("fleet-recovery", [f"not within {limit:g} s: {what}"])
        time.sleep(0.05)
    return time.monotonic() - start


def _submit(standalone: Standalone, token: str, specs: list[str], clients: int) -> list[str]:
    """The workflows over REST; their names. Any refusal ends the run."""
    names, failures, remaining, lock = [], [], iter(specs), threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while True:
                with lock:
                    body = next(remaining, None)
                if body is None:
                    return
                answer = http.post(f"{standalone.base}/api/pool/bench/workflow",
                                   headers={"Authorization": f"Bearer {token}"},
                                   json={"file": body})
                (names if answer.status_code == 201 else failures).append(
                    answer.json().get("name") if answer.status_code == 201
                    else answer.status_code)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fail_on("fleet-recovery", [f"{len(failures)} of {len(specs)} submissions refused: "
                               f"{failures[:5]}"] if failures else [])
    return names


def one_run(args, run_dir: Path) -> dict:
    east = Cluster("east", run_dir, args.nodes * 2)
    west = Cluster("west", run_dir, args.nodes)
    extra = {"OSMO_BACKEND_LEASE": str(args.lease)} if args.lease else {}
    standalone = Standalone(run_dir / "osmo", extra)
    kubelet = None
    try:
        east.start(placement=False)
        west.start(placement=True)
        standalone.start()
        standalone.join_database()
        from django.conf import settings
        from django.db import connections
        from django.utils import timezone

        from osmo.accounts import services as accounts
        from scheduler.backends import services as backends
        from scheduler.models import Backend, Node
        from workflows.models import Task, WorkflowGroup

        for cluster in (east, west):
            backends.backend_upsert(name=cluster.name, kind="kubernetes", placement="osmo",
                                    k8s_namespace=NAMESPACE)
        tokens = {name: accounts.token_issue(user=accounts.user_ensure(
            username=f"agent-{name}", groups=[f"osmo-backend-{name}"])) for name in ("east",
                                                                                  "west")}
        token = standalone.bench_token("bench", 10**6, backends=["east", "west"])
        lease = settings.OSMO_BACKEND_LEASE
        connections.close_all()
        for cluster in (east, west):
            cluster.start_agent(standalone, tokens[cluster.name])
        kubelet = Kubelet(west.admin, NAMESPACE).start()
        nodes = len(east.nodes) + len(west.nodes)
        _until(lambda: Node.objects.filter(backend__in=["east", "west"]).count() == nodes,
               args.limit, "both agents' Node mirrors", east, west)

        stream = shapes(args.gangs, len(west.nodes) * 8)
        names = _submit(standalone, token, [spec(*shape) for shape in stream], args.clients)
        pods = sum(tasks for tasks, _ in stream)
        _until(lambda: len(east.names(PODS)) == pods, args.limit,
               f"all {pods} pods of the {len(names)} gangs on east", east, west)
        chosen = dict(WorkflowGroup.objects.values_list("workflow__name", "backend"))
        fail_on("fleet-recovery", [f"gangs not sent to east at first: {chosen}"]
                if set(chosen.values()) != {"east"} else [])
        moved = east.names(PODS)
        before = api_requests(west.admin)

        east.agent.kill()
        east.agent.wait(10)
        east.server.stop_apiserver()
        ran = _until(lambda: moved <= set(kubelet.running), lease + args.limit,
                     "every moved pod Running on west", west)
        _until(lambda: Task.objects.filter(status="RUNNING").count() == pods, args.limit,
               "every task RUNNING", west)
        # When east's lease ended, on the kubelet stand-in's clock.
        heartbeat = Backend.objects.get(name="east").last_heartbeat
        now, wall = time.perf_counter(), timezone.now()
        lease_end = now - (wall - heartbeat - timedelta(seconds=lease)).total_seconds()
        recovery = max(kubelet.running[name] for name in moved) - lease_end
        first = min(kubelet.created[name] for name in moved) - lease_end

        problems = list(kubelet.problems())
        finally_chosen = dict(WorkflowGroup.objects.values_list("workflow__name", "backend"))
        if set(finally_chosen.values()) != {"west"}:
            problems.append(f"gangs not on west after the loss: {finally_chosen}")
        requests = delta(api_requests(west.admin), before)
        if _bindings(requests) != pods:
            problems.append(f"{_bindings(requests)} bindings on west for {pods} pods")
        problems += verify(west.admin, count=pods, running=True)
        fail_on("fleet-recovery", problems)

        east.server.start_apiserver()
        east.start_agent(standalone, tokens["east"])
        fenced = _until(lambda: not east.names(PODS) and not east.names(PODGROUPS),
                        args.limit, "east empty after its return (the fence)", east)
        fail_on("fleet-recovery", verify(west.admin, count=pods, running=True))
        print(f"[fleet-recovery] checked: {len(names)} gangs ({pods} pods) chosen east, moved "
              f"to west, each pod there once, bound once and Running; east empty after its "
              f"return (lease {lease} s; {ran:.1f} s from the kill to the last pod Running)",
              flush=True)
        return {"recovery": recovery, "first": first, "fenced": fenced, "gangs": len(names)}
    finally:
        if kubelet is not None:
            kubelet.stop()
        for cluster in (east, west):
            cluster.stop()
        standalone.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gangs", type=int, default=60)
    parser.add_argument("--nodes", type=int, default=64, help="west's; east has twice")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lease", type=int, default=0, help="OSMO_BACKEND_LEASE (0: default)")
    parser.add_argument("--limit", type=float, default=180.0)
    args = parser.parse_args()
    from tests.kube_real.server import unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason)
    runs = []
    for index in range(args.runs):
        run_dir = Path(tempfile.mkdtemp(prefix=f"osmo-fleet-recovery-{index + 1}-"))
        try:
            runs.append(one_run(args, run_dir))
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(f"\n[fleet-recovery] {runs[0]['gangs']} waiting gangs of a lost cluster, "
          f"{args.runs} run(s):")
    print(f"  first moved pod created on west: "
          f"{describe_spread([r['first'] for r in runs], ' s')} after the lease ended")
    print(f"recovery, lease end → every moved gang Running elsewhere: "
          f"{describe_spread([r['recovery'] for r in runs], ' s')}")
    print(f"  the returned cluster emptied of the moved gangs (fence): "
          f"{describe_spread([r['fenced'] for r in runs], ' s')} after its agent started")
    print("  peers, documented defaults (not run here):")
    for peer in PEERS:
        print(f"    {peer}")


if __name__ == "__main__":
    main()
