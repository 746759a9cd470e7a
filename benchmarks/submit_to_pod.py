"""Submission → pod created on a real kube-apiserver: how long a new workflow waits before the
Kubernetes backend creates its pod.

Starts the product as a user does on Kubernetes — gunicorn and ``manage.py run_k8s_backend``
(``OSMO_CLUSTER_BACKEND=kubernetes``, KAI placement, ``OSMO_K8S_INTERVAL`` as configured, 1 s
by default) on a throwaway embedded PostgreSQL, against the real API server of
``../shared/tools/kube`` — then submits single-GPU workflows one at a time through the REST API,
at random moments of the backend's poll interval, and watches the namespace's pods. Each figure
is from the start of the POST to the moment the watch shows the workflow's pod. It checks that
every submission was admitted (201) and that every workflow got exactly one pod before it
prints a figure.

    python benchmarks/submit_to_pod.py [--workflows 60] [--interval 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.django_env import bootstrap, percentile  # noqa: E402
from benchmarks.end_to_end import SPEC  # noqa: E402 - the same one-GPU workflow
from benchmarks.k8s_fill import Admin  # noqa: E402
from scheduler.core.kai_names import WORKFLOW_NAME_ANNOTATION  # noqa: E402

NAMESPACE = "osmo"


class PodWatch:
    """The moment each workflow's first pod shows up in a WATCH of the namespace's pods."""

    def __init__(self, admin: Admin):
        self.admin = admin
        self.seen: dict[str, float] = {}
        self.pods: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        path = f"{self.admin.base}/api/v1/namespaces/{NAMESPACE}/pods"
        version = self.admin.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods",
                                  query=[("limit", "1")])["metadata"]["resourceVersion"]
        http = httpx.Client(verify=self.admin.verify, timeout=None,
                            headers={"Authorization": f"Bearer {self.admin.token}"})
        while not self._stop.is_set():
            query = [("watch", "1"), ("resourceVersion", version), ("timeoutSeconds", "30")]
            try:
                with http.stream("GET", path, params=query) as response:
                    for line in response.iter_lines():
                        if self._stop.is_set() or not line:
                            continue
                        event = json.loads(line)
                        metadata = event["object"].get("metadata") or {}
                        version = metadata.get("resourceVersion", version)
                        if event["type"] != "ADDED":
                            continue
                        workflow = (metadata.get("annotations") or {}).get(
                            WORKFLOW_NAME_ANNOTATION)
                        if workflow:
                            self.seen.setdefault(workflow, time.perf_counter())
                            self.pods.setdefault(workflow, set()).add(metadata["name"])
            except httpx.HTTPError:
                if not self._stop.is_set():
                    raise


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=60)
    parser.add_argument("--interval", type=float, default=1.0,
                        help="OSMO_K8S_INTERVAL of the backend (the product's default: 1 s)")
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()

    bootstrap()
    from django.db import connections

    from osmo.accounts import services as accounts
    from osmo.embedded import free_port
    from pools import services as pools
    from tests.kube_real.server import ApiServer, unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason)
    run_dir = Path(tempfile.mkdtemp(prefix="osmo-wake-bench-"))
    server = ApiServer(run_dir)
    processes: list[subprocess.Popen] = []
    watch = None
    try:
        server.start()
        admin = Admin(server.kubeconfig)
        pools.pool_upsert(actor=None, name="bench", quota_gpus=args.workflows)
        user = accounts.user_ensure(username="bench", groups=["osmo-bench-user"])
        token = accounts.token_issue(user=user)
        connections.close_all()

        port = free_port()
        env = dict(os.environ, OSMO_LOG_LEVEL="WARNING", OSMO_CLUSTER_BACKEND="kubernetes",
                   OSMO_NAMESPACE=NAMESPACE, OSMO_KAI_SYNC="0",
                   OSMO_KAI_KUBECONFIG=str(server.backend_kubeconfig),
                   OSMO_K8S_INTERVAL=str(args.interval))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "osmo.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--workers", "2", "--log-level", "warning"],
            env=env, cwd=str(ROOT)))
        processes.append(subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "run_k8s_backend"], env=env,
            cwd=str(ROOT)))
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/api/health", timeout=2).json().get("cluster") == "ok":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        else:
            raise SystemExit("the backend never reported the cluster healthy")
        watch = PodWatch(admin).start()
        time.sleep(1.0)  # the watch is open

        rng = random.Random(args.seed)
        started: dict[str, float] = {}
        failures = []
        with httpx.Client(base_url=base, timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            for _ in range(4):  # both web workers up and warm
                http.get("/api/workflow", params={"limit": 1})
            for _ in range(args.workflows):
                time.sleep(rng.uniform(0, args.interval))  # anywhere in the poll interval
                t0 = time.perf_counter()
                response = http.post("/api/pool/bench/workflow", json={"file": SPEC})
                if response.status_code != 201:
                    failures.append(f"{response.status_code} {response.text[:120]}")
                    continue
                started[response.json()["name"]] = t0
        deadline = time.monotonic() + 10 * args.interval + 30
        while time.monotonic() < deadline and not all(name in watch.seen for name in started):
            time.sleep(0.05)
    finally:
        if watch is not None:
            watch.stop()
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)

    missing = sorted(set(started) - set(watch.seen))
    doubled = sorted(name for name in started if len(watch.pods.get(name, ())) != 1)
    if failures or missing or doubled:
        raise SystemExit(f"FAILED: {len(failures)} submission(s) refused {failures[:3]}, "
                         f"{len(missing)} workflow(s) without a pod {missing[:3]}, "
                         f"{len(doubled)} with other than one pod {doubled[:3]}")
    latencies = [(watch.seen[name] - t0) * 1000 for name, t0 in started.items()]
    print(f"[submit→pod] {len(latencies)} single-GPU workflows submitted one at a time at random "
          f"moments; backend OSMO_K8S_INTERVAL={args.interval:g} s, KAI placement")
    print(f"[submit→pod] ms from POST to the pod in a watch: p50 {percentile(latencies, 0.5):.0f}, "
          f"p99 {percentile(latencies, 0.99):.0f}, max {max(latencies):.0f}, "
          f"min {min(latencies):.0f}")


if __name__ == "__main__":
    main()
