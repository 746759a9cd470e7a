"""POST /api/pool/{pool}/workflow with concurrent clients against a running server.

Starts gunicorn on a throwaway embedded PostgreSQL, then drives `GET /api/whoami` and workflow
submissions with N concurrent clients (keep-alive HTTP) and prints requests/s, p50 and p99 of
each, and the ratio of submit throughput to whoami throughput measured in the same run.
Targets: submit p99 < 100 ms; submit throughput ≥ 0.5 × whoami throughput.

    python benchmarks/admission.py [--clients 8] [--requests 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_env import bootstrap, percentile  # noqa: E402

SPEC = """
workflow:
  name: bench
  groups:
  - name: train
    tasks:
    - {name: master, image: nvcr.io/nvidia/pytorch:24.01-py3, command: [torchrun], lead: true,
       resource: gpu}
    - {name: worker, image: nvcr.io/nvidia/pytorch:24.01-py3, command: [torchrun],
       resource: gpu}
  resources:
    gpu: {gpu: 8, cpu: 16, memory: 64Gi}
"""


def drive(clients: int, requests: int, call) -> tuple[float, list[float], int]:
    samples: list[float] = []
    failures = 0
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client_loop():
        nonlocal failures
        with httpx.Client(timeout=30) as http:
            barrier.wait()
            for _ in range(requests):
                start = time.perf_counter()
                ok = call(http)
                elapsed = (time.perf_counter() - start) * 1000
                with lock:
                    samples.append(elapsed)
                    failures += not ok

    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return len(samples) / (time.perf_counter() - start), samples, failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=100, help="per client")
    parser.add_argument("--web-workers", type=int, default=4)
    args = parser.parse_args()

    bootstrap()
    from django.db import connections

    from osmo.accounts import services as accounts
    from osmo.embedded import free_port
    from pools import services as pools

    pools.pool_upsert(actor=None, name="bench", quota_gpus=100_000)
    user = accounts.user_ensure(username="bench", groups=["osmo-bench-user"])
    token = accounts.token_issue(user=user)
    connections.close_all()
    port = free_port()
    env = dict(os.environ, OSMO_LOG_LEVEL="WARNING")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "osmo.wsgi:application",
         "--config", "python:osmo.gunicorn_config", "--bind",
         f"127.0.0.1:{port}", "--workers", str(args.web_workers), "--threads", "2",
         "--log-level", "warning"], env=env, cwd=str(Path(__file__).resolve().parent.parent))
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                time.sleep(0.2)

        def whoami(http):
            return http.get(f"{base}/api/whoami", headers=headers).status_code == 200

        def submit(http):
            response = http.post(f"{base}/api/pool/bench/workflow", headers=headers,
                                 json={"file": SPEC})
            return response.status_code == 201

        drive(args.clients, 10, whoami)  # warm-up
        drive(args.clients, 5, submit)
        results = {}
        for name, call in (("GET /api/whoami", whoami), ("POST .../workflow", submit)):
            rate, samples, failures = drive(args.clients, args.requests, call)
            results[name] = (rate, statistics.median(samples), percentile(samples, 0.99),
                             failures)
    finally:
        server.terminate()
        server.wait(10)

    print(f"{args.clients} concurrent clients × {args.requests} requests, gunicorn "
          f"{args.web_workers} workers × 2 threads")
    print(f"{'endpoint':<20}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'failed':>8}")
    for name, (rate, p50, p99, failures) in results.items():
        print(f"{name:<20}{rate:>9.1f}{p50:>9.1f}{p99:>9.1f}{failures:>8}")
    ratio = results["POST .../workflow"][0] / results["GET /api/whoami"][0]
    p99 = results["POST .../workflow"][2]
    print(f"submit/whoami throughput ratio: {ratio:.2f}")
    print(f"targets (p99 < 100 ms, ratio ≥ 0.5): "
          f"{'met' if p99 < 100 and ratio >= 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
