"""What metrics cost: submission latency and the 4,000-node scheduling cycle, metrics on vs
off (``OSMO_METRICS``), measured in alternation because the machine may be shared.

- Submissions: two ``osmo standalone --no-demo`` side by side, one with ``OSMO_METRICS=on``
  (its /metrics scraped every 5 s, as Prometheus would), one with ``off``; rounds of
  concurrent ``POST /api/pool/bench/workflow`` alternate between them. Checked before any
  figure: every submission admitted, the admitted count on /metrics equal to what was sent,
  and the other side's /metrics a 404.
- Cycle: 4,000 nodes × 8 GPUs registered through the services; each repetition admits 1,000
  single-GPU workflows (untimed) and times one ``scheduler.services.cycle_run`` binding them all,
  metrics on and off in ABBA order, in multiprocess mode as the standalone's scheduler runs.

    python benchmarks/metrics_overhead.py [--rounds 10] [--per-round 200] [--cycles 8]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.admission import drive  # noqa: E402
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


def submissions(rounds: int, per_round: int, clients: int) -> dict[str, list[float]]:
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
        for side in sides.values():  # warm-up: imports, connections
            drive(clients, 5, side.submit)
        samples: dict[str, list[float]] = {"on": [], "off": []}
        sent = {"on": clients * 5, "off": clients * 5}
        for index in range(rounds):
            for name in (("on", "off") if index % 2 == 0 else ("off", "on")):
                _rate, times, failed = drive(clients, per_round // clients, sides[name].submit)
                assert failed == 0, f"{failed} submissions refused ({name})"
                samples[name] += times
                sent[name] += len(times)
        stop.set()
        text = httpx.get(f"{sides['on'].url}/metrics", headers=sides["on"].headers).text
        admitted = sum(float(value) for value in re.findall(
            r'^osmo_admission_attempts_total\{[^}]*result="admitted"[^}]*\} (\S+)$', text, re.M))
        assert admitted == sent["on"], (admitted, sent["on"])
        assert httpx.get(f"{sides['off'].url}/metrics",
                         headers=sides["off"].headers).status_code == 404
        return samples
    finally:
        stop.set()
        for side in sides.values():
            side.stop()


def cycles(repetitions: int, per_cycle: int) -> dict[str, list[float]]:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="osmo-bench-prom-")
    from benchmarks.django_env import bootstrap

    bootstrap()
    from django.conf import settings

    from osmo.accounts import services as accounts
    from pools import services as pools
    from scheduler import services as scheduler
    from workflows.admission import workflow_submit

    for i in range(4000):
        scheduler.node_register(name=f"node-{i:04d}", gpus=8, cpu_millis=128_000,
                                memory_bytes=2**40,
                                labels={"topology.osmo/zone": f"z{i // 256}",
                                        "topology.osmo/rack": f"r{i // 16}"})
    pools.pool_upsert(actor=None, name="bench", quota_gpus=1_000_000)
    user = accounts.user_ensure(username="bench", groups=["osmo-bench-user"])
    scheduler.cycle_run()  # warm-up: an empty cycle
    times: dict[str, list[float]] = {"on": [], "off": []}
    order = ["on", "off", "off", "on"] * ((repetitions + 3) // 4)
    for name in order[:repetitions]:
        for _ in range(per_cycle):
            workflow_submit(actor=user, pool="bench", source=SPEC)
        settings.OSMO_METRICS = name == "on"
        started = time.perf_counter()
        summary = scheduler.cycle_run()
        times[name].append(time.perf_counter() - started)
        settings.OSMO_METRICS = True
        assert summary.bound == per_cycle, (summary, per_cycle)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--per-cycle", type=int, default=1000)
    args = parser.parse_args()
    print(f"load before: {load()}")
    samples = submissions(args.rounds, args.per_round, args.clients)
    print(f"submissions: {args.rounds} alternating rounds × {args.per_round} per side, "
          f"{args.clients} clients, two standalones side by side")
    print(f"{'metrics':<9}{'n':>6}{'p50 ms':>9}{'p99 ms':>9}")
    figures = {}
    for name in ("on", "off"):
        figures[name] = (statistics.median(samples[name]), percentile(samples[name], 0.99))
        print(f"{name:<9}{len(samples[name]):>6}{figures[name][0]:>9.1f}"
              f"{figures[name][1]:>9.1f}")
    print(f"overhead: p50 {overhead(figures['on'][0], figures['off'][0])}, "
          f"p99 {overhead(figures['on'][1], figures['off'][1])} (target < 5% each)")
    times = cycles(args.cycles, args.per_cycle)
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"cycle: 4,000 nodes × 8 GPUs, {args.per_cycle} workflows bound per cycle, "
          f"{args.cycles} cycles in ABBA order")
    for name, median in (("on", on), ("off", off)):
        each = ", ".join(f"{t * 1000:.0f}" for t in times[name])
        print(f"metrics {name:<3} median {median * 1000:.0f} ms  ({each})")
    print(f"overhead: {overhead(on, off)} (target < 5%)")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
