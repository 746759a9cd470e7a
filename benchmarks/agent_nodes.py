"""Node inventory through the backend agent, on a real kube-apiserver with ``--nodes`` (2,000)
simulated Nodes: the product as a user starts it (``osmo standalone``, a ``kubernetes``
backend row, and ``osmo backend-agent`` with a token of a user in ``osmo-backend-NAME`` and
the agent's RBAC of ``deploy/kubernetes/agent``). Two figures, each against its floor in the
same run:

- **inventory**: from the agent's start until every Node is a row of the backend (the LIST,
  its messages and their upserts), against a bare client LISTing the same Nodes;
- **live updates** (``--rounds`` rounds): every Node's labels patched by ``--patchers``
  threads as fast as the API server takes them; from the first patch until every row carries
  its new label, against a bare WATCH of the Nodes receiving every one of those updates (the
  floor: the API server's own rate of delivering them) — on a shared machine the API server
  takes a few hundred patches a second, so this shows the agent keeping up, not its rate;
- **node updates/s**: the agent paused (SIGSTOP) while every Node is patched, then resumed:
  Nodes / the seconds from the resume until every row carries its new label — the rate of
  the agent's path (its watch, its messages, the service's upserts) alone.

Before any figure it checks the rows: exactly the cluster's Nodes, each with the capacity and
the labels the cluster has. Targets: ≥ 1,000 node updates/s (OSMO's Python listener: 58.6
messages/s on 1,000 nodes; its Go rewrite: 951/s).

    python benchmarks/agent_nodes.py [--nodes 2000] [--rounds 3] [--patchers 16]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import describe_spread, fail_on  # noqa: E402
from benchmarks.k8s_fill import Admin  # noqa: E402
from benchmarks.standalone import Standalone  # noqa: E402

BACKEND = "bench-agent"
ROUND_LABEL = "bench.osmo/round"
TARGET = 1000.0


class NodeWatch:
    """A bare WATCH of the Nodes (the floor): when each Node was last seen at ``round``."""

    def __init__(self, admin: Admin):
        self.admin = admin
        self.seen: dict[str, float] = {}
        self.round = ""
        self._stop = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> NodeWatch:
        self._version = self.admin.call("GET", "/api/v1/nodes", query=[("limit", "1")])[
            "metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        http = httpx.Client(verify=self.admin.verify, timeout=None,
                            headers={"Authorization": f"Bearer {self.admin.token}"})
        try:
            while not self._stop.is_set():
                query = [("watch", "1"), ("resourceVersion", self._version),
                         ("timeoutSeconds", "30")]
                with http.stream("GET", f"{self.admin.base}/api/v1/nodes",
                                 params=query) as response:
                    for line in response.iter_lines():
                        if self._stop.is_set():
                            return
                        if not line:
                            continue
                        event = json.loads(line)
                        obj = event["object"]
                        self._version = obj["metadata"].get("resourceVersion", self._version)
                        labels = obj["metadata"].get("labels") or {}
                        if self.round and labels.get(ROUND_LABEL) == self.round:
                            self.seen.setdefault(obj["metadata"]["name"], time.perf_counter())
        except Exception as exc:  # noqa: BLE001 - kept for the checks
            if not self._stop.is_set():
                self.errors.append(exc)


def rows(label: str | None = None) -> int:
    from scheduler.models import Node

    nodes = Node.objects.filter(backend=BACKEND)
    if label is not None:
        nodes = nodes.filter(labels__contains={ROUND_LABEL: label})
    return nodes.count()


def until(predicate, limit: float, what: str) -> float:
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        if predicate():
            return time.perf_counter()
        time.sleep(0.02)
    raise SystemExit(f"[agent-nodes] FAILED, no figure printed: {what} not within {limit:g} s")


def registered_now() -> bool:
    from scheduler.models import Backend

    return bool(Backend.objects.filter(name=BACKEND).values_list("k8s_uid", flat=True)[0])


def check_rows(admin: Admin) -> list[str]:
    """The backend's rows are exactly the cluster's Nodes, capacities and labels alike."""
    from scheduler.backends.kubernetes.nodes import node_fields
    from scheduler.models import Node

    cluster = {item["metadata"]["name"]: node_fields(item)
               for item in admin.call("GET", "/api/v1/nodes")["items"]}
    mirrored = {node.name: node for node in Node.objects.filter(backend=BACKEND)}
    problems = []
    if set(mirrored) != set(cluster):
        problems.append(f"{len(set(cluster) - set(mirrored))} Nodes missing, "
                        f"{len(set(mirrored) - set(cluster))} rows of no Node")
    for name, fields in cluster.items():
        row = mirrored.get(name)
        if row is not None and (row.gpus, row.cpu_millis, row.memory_bytes, row.labels,
                                row.schedulable) != (
                fields["gpus"], fields["cpu_millis"], fields["memory_bytes"],
                fields["labels"], fields["schedulable"]):
            problems.append(f"row {name} differs from its Node")
    return problems[:10]


def start_agent(server, standalone: Standalone, run_dir: Path) -> subprocess.Popen:
    """A user in osmo-backend-NAME, the agent's RBAC, ``osmo backend-agent``."""
    from django.db import connections

    from osmo.accounts import services as accounts
    from scheduler.backends import services as backends
    from tests.kube_real.agent import agent_kubeconfig, install_agent_rbac

    backends.backend_upsert(name=BACKEND, kind="kubernetes", k8s_namespace="osmo")
    user = accounts.user_ensure(username="bench-agent", groups=[f"osmo-backend-{BACKEND}"])
    token = accounts.token_issue(user=user)
    connections.close_all()
    install_agent_rbac(server, "osmo")
    kubeconfig = agent_kubeconfig(server, run_dir / "agent.kubeconfig")
    log = (run_dir / "agent.log").open("wb")
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "osmo"), "backend-agent", "--url", standalone.base,
         "--token", token, "--name", BACKEND, "--kubeconfig", str(kubeconfig)],
        env=standalone.env, cwd=str(ROOT), stdout=log, stderr=log)


def patch_all(admin: Admin, names: list[str], label: str, patchers: int) -> float:
    started = time.perf_counter()
    admin.parallel([lambda name=name: admin.call(
        "PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {ROUND_LABEL: label}}},
        patch=True) for name in names], workers=patchers)
    return time.perf_counter() - started


def run(server, args, run_dir: Path) -> None:
    admin = Admin(server.kubeconfig)
    t0 = time.perf_counter()
    names = admin.nodes(args.nodes)
    print(f"[agent-nodes] {args.nodes} Nodes created in {time.perf_counter() - t0:.1f} s",
          flush=True)
    t0 = time.perf_counter()
    listed = admin.call("GET", "/api/v1/nodes")["items"]
    list_floor = time.perf_counter() - t0
    fail_on("agent-nodes", [] if len(listed) == args.nodes else
            [f"the LIST has {len(listed)} Nodes"])
    standalone = Standalone(run_dir / "osmo")
    standalone.start()
    standalone.join_database()
    agent = None
    watch = NodeWatch(admin).start()
    try:
        started = time.perf_counter()
        agent = start_agent(server, standalone, run_dir)
        registered = until(registered_now, args.limit, "the agent registered") - started
        inventory = until(lambda: rows() >= args.nodes, args.limit,
                          f"the {args.nodes} Nodes mirrored") - started
        fail_on("agent-nodes", check_rows(admin))
        updates, floors, patching = [], [], []
        for index in range(args.rounds):
            label = f"r{index + 1}"
            watch.round = label
            first = time.perf_counter()
            patching.append(patch_all(admin, names, label, args.patchers))
            done = until(lambda label=label: rows(label) >= args.nodes, args.limit,
                         f"round {label}'s labels mirrored")
            until(lambda: len(watch.seen) >= args.nodes, args.limit,
                  f"round {label}'s updates watched")
            updates.append(done - first)
            floors.append(max(watch.seen.values()) - first)
            watch.seen = {}
            fail_on("agent-nodes", check_rows(admin) + [repr(e) for e in watch.errors])
        # The backlog: the agent paused (SIGSTOP) while every Node is patched, then resumed —
        # the rate of the agent's own path, not of how fast this API server takes patches.
        label = "backlog"
        os.kill(agent.pid, signal.SIGSTOP)
        try:
            patch_all(admin, names, label, args.patchers)
        finally:
            os.kill(agent.pid, signal.SIGCONT)
        resumed = time.perf_counter()
        backlog = until(lambda: rows(label) >= args.nodes, args.limit,
                        "the backlog's labels mirrored") - resumed
        fail_on("agent-nodes", check_rows(admin))
        if agent.poll() is not None:
            fail_on("agent-nodes", [f"the agent exited ({agent.returncode})"])
    finally:
        watch.stop()
        if agent is not None and agent.poll() is None:
            agent.terminate()
            agent.wait(30)
        standalone.stop()
    rates = [args.nodes / seconds for seconds in updates]
    floor_rates = [args.nodes / seconds for seconds in floors]
    ratios = [a / b for a, b in zip(updates, floors, strict=True)]
    print(f"\n[agent-nodes] {args.nodes} Nodes, {args.rounds} update round(s), "
          f"{args.patchers} patching threads (checked: every row matches its Node):")
    after = args.nodes / max(inventory - registered, 1e-3)
    print(f"  inventory, agent start → every Node a row: {inventory:.2f} s, of "
          f"which {registered:.2f} s until it registered ({after:.0f} Nodes/s after; "
          f"a bare LIST of them: {list_floor:.2f} s)")
    print(f"  patching alone (the API server taking {args.nodes} PATCHes): "
          f"{' / '.join(f'{s:.2f}' for s in patching)} s")
    print(f"  updates, first patch → every row updated: "
          f"{' / '.join(f'{s:.2f}' for s in updates)} s — {describe_spread(updates, ' s')}")
    print(f"  floor, first patch → a bare WATCH saw every update: "
          f"{' / '.join(f'{s:.2f}' for s in floors)} s ({describe_spread(floor_rates)} /s)")
    print(f"  through the agent / floor: {describe_spread(ratios, digits=2)}")
    print(f"  live: through the agent {' / '.join(f'{r:.0f}' for r in rates)} updates/s, "
          "as fast as the API server took the patches")
    rate = args.nodes / backlog
    print(f"node updates/s through the agent: {rate:.0f} ({args.nodes} updates waiting while "
          f"it was paused, mirrored {backlog:.2f} s after it resumed; target ≥ {TARGET:.0f}: "
          f"{'met' if rate >= TARGET else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--patchers", type=int, default=16)
    parser.add_argument("--limit", type=float, default=300.0)
    args = parser.parse_args()
    from tests.kube_real.server import ApiServer, unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason)
    run_dir = Path(tempfile.mkdtemp(prefix="osmo-agent-nodes-"))
    server = ApiServer(run_dir)
    try:
        server.start()
        run(server, args, run_dir)
    finally:
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
