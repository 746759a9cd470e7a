"""What metrics cost: submission latency and the 4,000-node scheduling cycle, metrics on vs
off (``OSMO_METRICS``), measured in alternation because the machine may be shared.

- Submissions: two ``osmo standalone --no-demo`` side by side, one with ``OSMO_METRICS=on``
  (its /metrics scraped every 5 s, as Prometheus would), one with ``off``; concurrent clients
  send ``POST /api/pool/bench/workflow`` to one and the other in turn, request by request, so
  both see the same moment's load; also the CPU their web servers spent per submission.
  Checked before any figure: every submission admitted, the admitted count on /metrics equal
  to what was sent, and the other side's /metrics a 404.
- Cycle: 4,000 nodes (``--nodes``) × 8 GPUs registered through the services; each repetition
  admits 500 single-GPU workflows (untimed) and times one
  ``scheduler.backends.embedded.cycle.cycle_run``
  binding them all, metrics on and off in ABBA order, in multiprocess mode as the standalone's
  scheduler runs; then the recording call alone, which the cycle's own noise cannot hide.

    python benchmarks/metrics_overhead.py [--requests 2000] [--cycles 16] [--nodes 4000]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.django_env import percentile  # noqa: E402

SPEC = ("workflow:\n  name: bench\n  tasks:\n  - {name: main, image: x, command: [sleep, '60'],"
        " resource: r}\n  resources:\n    r: {gpu: 1}\n")


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def overhead(on: float, off: float) -> str:
    return f"{(on - off) / off * 100:+.1f}%"


class Standalone:
    def __init__(self, work: Path, metrics: bool):
        from osmo.embedded import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items()
               if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
        env["OSMO_METRICS"] = "on" if metrics else "off"
        self.log = (work / f"standalone-{env['OSMO_METRICS']}.log").open("w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).with_name("osmo")), "standalone", "--no-demo", "--port",
             str(self.port), "--data-dir", str(work / env["OSMO_METRICS"])],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)

    def wait_ready(self) -> None:
        ready = self.process.stdout.readline()
        assert ready.startswith("OSMO ready"), f"standalone did not start ({self.log.name})"
        self.headers = {"Authorization": "Bearer " + self.process.stdout.readline().split()[1]}
        answer = httpx.put(f"{self.url}/api/configs/pool/bench", headers=self.headers,
                           json={"quota_gpus": 1_000_000}, timeout=30)
        assert answer.status_code in (200, 201), answer.text

    def submit(self, http) -> bool:
        return http.post(f"{self.url}/api/pool/bench/workflow", headers=self.headers,
                         json={"file": SPEC}).status_code == 201

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def _web_cpu(side: Standalone) -> float:
    """CPU seconds the side's web server (gunicorn and its workers) has used so far."""
    total = 0.0
    for process in psutil.Process(side.process.pid).children(recursive=True):
        try:
            if "gunicorn" in " ".join(process.cmdline()):
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            pass
    return total


def submissions(requests: int, clients: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each client alternates between the two sides request by request, so both see the same
    moment's load; returns the latencies (ms) and the web tier's CPU ms per submission."""
    work = Path(tempfile.mkdtemp(prefix="osmo-bench-metrics-"))
    sides = {"on": Standalone(work, True), "off": Standalone(work, False)}
    stop = threading.Event()
    try:
        for side in sides.values():
            side.wait_ready()

        def scrape() -> None:  # what a Prometheus server adds on the "on" side
            with httpx.Client(timeout=30) as http:
                while not stop.wait(5):
                    http.get(f"{sides['on'].url}/metrics", headers=sides["on"].headers)

        threading.Thread(target=scrape, daemon=True).start()
        with httpx.Client(timeout=60) as http:  # warm-up: imports, connections
            for side in sides.values():
                refused = sum(not side.submit(http) for _ in range(clients * 5))
                assert not refused, f"{refused} warm-up submissions refused"
        cpu = {name: _web_cpu(side) for name, side in sides.items()}
        samples: dict[str, list[float]] = {"on": [], "off": []}
        failures: list[str] = []
        lock = threading.Lock()

        def client(index: int) -> None:
            with httpx.Client(timeout=60) as http:
                for number in range(requests // clients):
                    order = ("on", "off") if (number + index) % 2 == 0 else ("off", "on")
                    for name in order:
                        started = time.perf_counter()
                        ok = sides[name].submit(http)
                        elapsed = (time.perf_counter() - started) * 1000
                        with lock:
                            samples[name].append(elapsed)
                            if not ok:
                                failures.append(name)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cpu = {name: (_web_cpu(side) - cpu[name]) * 1000 / len(samples[name])
               for name, side in sides.items()}
        stop.set()
        assert not failures, f"{len(failures)} submissions refused"
        text = httpx.get(f"{sides['on'].url}/metrics", headers=sides["on"].headers).text
        admitted = sum(float(value) for value in re.findall(
            r'^osmo_admission_attempts_total\{[^}]*result="admitted"[^}]*\} (\S+)$', text, re.M))
        assert admitted == len(samples["on"]) + clients * 5, (admitted, len(samples["on"]))
        assert httpx.get(f"{sides['off'].url}/metrics",
                         headers=sides["off"].headers).status_code == 404
        return samples, cpu
    finally:
        stop.set()
        for side in sides.values():
            side.stop()


def cycles(repetitions: int, per_cycle: int, nodes: int) -> dict[str, list[float]]:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="osmo-bench-prom-")
    from benchmarks.django_env import bootstrap

    bootstrap()
    from django.conf import settings

    from osmo.accounts import services as accounts
    from pools import services as pools
    from scheduler import metrics as scheduler_metrics
    from scheduler import services as scheduler
    from scheduler.backends.embedded import cycle as embedded_cycle
    from workflows.admission import workflow_submit

    for i in range(nodes):
        scheduler.node_register(name=f"node-{i:04d}", gpus=8, cpu_millis=128_000,
                                memory_bytes=2**40,
                                labels={"topology.osmo/zone": f"z{i // 256}",
                                        "topology.osmo/rack": f"r{i // 16}"})
    pools.pool_upsert(actor=None, name="bench", quota_gpus=1_000_000)
    user = accounts.user_ensure(username="bench", groups=["osmo-bench-user"])
    embedded_cycle.cycle_run()  # warm-up: an empty cycle
    times: dict[str, list[float]] = {"on": [], "off": []}
    order = ["on", "off", "off", "on"] * ((repetitions + 3) // 4)
    for name in order[:repetitions]:
        for _ in range(per_cycle):
            workflow_submit(actor=user, pool="bench", source=SPEC)
        settings.OSMO_METRICS = name == "on"
        started = time.perf_counter()
        summary = embedded_cycle.cycle_run()
        times[name].append(time.perf_counter() - started)
        settings.OSMO_METRICS = True
        assert summary.bound == per_cycle, (summary, per_cycle)
    # What recording itself costs, without the cycle's noise: the same call with the same
    # figures (per_cycle workflows bound a first time), timed alone.
    first_binds = [("NORMAL", 1.0)] * per_cycle
    started = time.perf_counter()
    for _ in range(20):
        scheduler_metrics.record_cycle(snapshot=0.1, decide=0.1, apply=0.1, bound=per_cycle,
                                       first_binds=first_binds)
    times["recording"] = [(time.perf_counter() - started) / 20]
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000, help="per side")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=16)
    parser.add_argument("--per-cycle", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=4000, help="nodes of the cycle's cluster")
    args = parser.parse_args()
    print(f"load before: {load()}")
    samples, cpu = submissions(args.requests, args.clients)
    print(f"submissions: {args.requests} per side, {args.clients} clients each alternating "
          f"between two standalones side by side (metrics on: scraped every 5 s)")
    print(f"{'metrics':<9}{'n':>6}{'p50 ms':>9}{'p99 ms':>9}{'web CPU ms/req':>16}")
    figures = {}
    for name in ("on", "off"):
        figures[name] = (statistics.median(samples[name]), percentile(samples[name], 0.99))
        print(f"{name:<9}{len(samples[name]):>6}{figures[name][0]:>9.1f}"
              f"{figures[name][1]:>9.1f}{cpu[name]:>16.2f}")
    print(f"overhead: p50 {overhead(figures['on'][0], figures['off'][0])}, "
          f"p99 {overhead(figures['on'][1], figures['off'][1])}, web CPU "
          f"{overhead(cpu['on'], cpu['off'])} (target < 5% each)")
    times = cycles(args.cycles, args.per_cycle, args.nodes)
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"cycle: {args.nodes:,} nodes × 8 GPUs, {args.per_cycle} workflows bound per cycle, "
          f"{args.cycles} cycles in ABBA order")
    for name, median in (("on", on), ("off", off)):
        each = ", ".join(f"{t * 1000:.0f}" for t in times[name])
        print(f"metrics {name:<3} median {median * 1000:.0f} ms  ({each})")
    print(f"overhead: {overhead(on, off)} (target < 5%)")
    recording = times["recording"][0]
    print(f"recording a cycle's metrics alone: {recording * 1000:.2f} ms "
          f"({recording / off * 100:.2f}% of the median cycle without metrics)")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
