"""POST /api/pool/{pool}/workflow with concurrent clients against the product as a user starts
it: ``osmo standalone`` (the embedded cluster, its defaults: web workers and threads from the
machine, the scheduling loop running) in a throwaway data folder.

Drives `GET /api/whoami` and workflow submissions with N concurrent clients (keep-alive HTTP
through the standard library's client: httpx cost the machine 1.65 ms of CPU a request, which
the product's processes then lacked; this one 0.35 ms) and prints requests/s, p50 and p99 of
each, the ratio of submit throughput to whoami throughput measured in the same run, the CPU
each submission cost (the web processes, PostgreSQL, the rest of the product, the benchmark's
own clients) and the load of the machine. Every submission must be accepted (201), and the
database must hold each of them (its workflow, under a name of its own, and its two tasks),
before a figure is printed. Targets: submit ≥ 300/s with p99 < 100 ms (8 clients); submit
throughput ≥ 0.5 × whoami throughput.

    python benchmarks/admission.py [--clients 8] [--requests 100]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import cpu  # noqa: E402
from benchmarks.django_env import percentile  # noqa: E402
from benchmarks.standalone import Standalone  # noqa: E402
from osmo.capacity import WEB_THREADS, cpus, web_workers  # noqa: E402

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


WARM_UP = 5  # submissions per client before the measured ones


def stored_submissions() -> tuple[int, int, int]:
    """(workflows, their distinct names, their tasks) the product stored in the pool."""
    from workflows.models import Task, Workflow

    workflows = Workflow.objects.filter(pool__name="bench")
    return (workflows.count(), workflows.values("name").distinct().count(),
            Task.objects.filter(workflow__pool__name="bench").count())


def cpu_seconds(standalone: Standalone) -> Counter:
    """CPU seconds used so far by the product's processes (web, database, the rest) and by
    this process (the clients)."""
    parts = cpu.cpu_seconds(cpu.standalone_trees(standalone.process.pid, standalone.data_dir),
                            own="clients")
    product = {"web": parts.pop("web", 0.0), "PostgreSQL": parts.pop("PostgreSQL", 0.0)}
    clients = parts.pop("clients")
    return Counter({**product, "other": sum(parts.values()), "clients": clients})


def drive(base: str, clients: int, requests: int, call) -> tuple[float, list[float], int]:
    address = urlsplit(base)
    samples: list[float] = []
    failures = 0
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client_loop():
        nonlocal failures
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        barrier.wait()
        for _ in range(requests):
            start = time.perf_counter()
            ok = call(connection)
            elapsed = (time.perf_counter() - start) * 1000
            with lock:
                samples.append(elapsed)
                failures += not ok
        connection.close()

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
    args = parser.parse_args()

    run_dir = Path(tempfile.mkdtemp(prefix="osmo-admission-bench-"))
    standalone = Standalone(run_dir / "osmo")
    try:
        standalone.start()
        standalone.join_database()
        token = standalone.bench_token("bench", 100_000_000)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        body = json.dumps({"file": SPEC})

        def answered(connection, method: str, path: str, expected: int, **sent) -> bool:
            connection.request(method, path, headers=headers, **sent)
            response = connection.getresponse()
            response.read()
            return response.status == expected

        def whoami(connection):
            return answered(connection, "GET", "/api/whoami", 200)

        def submit(connection):
            return answered(connection, "POST", "/api/pool/bench/workflow", 201, body=body)

        base = standalone.base
        drive(base, args.clients, 10, whoami)  # warm-up
        drive(base, args.clients, WARM_UP, submit)
        results, cpu_ms = {}, {}
        for name, call in (("GET /api/whoami", whoami), ("POST .../workflow", submit)):
            before = cpu_seconds(standalone)
            rate, samples, failures = drive(base, args.clients, args.requests, call)
            after = cpu_seconds(standalone)
            results[name] = (rate, statistics.median(samples), percentile(samples, 0.99),
                             failures)
            used = cpu.spent(before, after)
            cpu_ms[name] = {part: used[part] * 1000 / len(samples) for part in before}
        stored = stored_submissions()
    finally:
        standalone.stop()
        shutil.rmtree(run_dir, ignore_errors=True)

    failed = sum(r[3] for r in results.values())
    if failed:
        raise SystemExit(f"{failed} requests failed: no figure printed")
    accepted = args.clients * (WARM_UP + args.requests)
    if stored != (accepted, accepted, 2 * accepted):
        raise SystemExit(f"{accepted} submissions accepted, but the database holds "
                         f"(workflows, distinct names, tasks) {stored}: no figure printed")
    print(f"{args.clients} concurrent clients × {args.requests} requests, osmo standalone with "
          f"its defaults ({web_workers()} web workers × {WEB_THREADS} threads on "
          f"{cpus()} CPUs); load average {os.getloadavg()[0]:.1f}")
    parts = list(cpu_ms["GET /api/whoami"])
    print(f"{'endpoint':<20}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}   CPU ms a request: "
          + ", ".join(parts) + ", all")
    for name, (rate, p50, p99, _failures) in results.items():
        shares = cpu_ms[name]
        print(f"{name:<20}{rate:>9.1f}{p50:>9.1f}{p99:>9.1f}   "
              + ", ".join(f"{shares[part]:.2f}" for part in parts)
              + f", {sum(shares.values()):.2f}")
    rate, _p50, p99, _ = results["POST .../workflow"]
    ratio = rate / results["GET /api/whoami"][0]
    print(f"submit/whoami throughput ratio: {ratio:.2f}")
    print(f"targets (submit ≥ 300/s, p99 < 100 ms, ratio ≥ 0.5): "
          f"{'met' if rate >= 300 and p99 < 100 and ratio >= 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
