"""A large gang under a stream of small jobs: does it start, how soon, and at what cost?

Runs the product as a user starts it — `osmo standalone` (embedded cluster) on a throwaway data
folder — and drives it through the REST API only: registers N nodes x 8 GPUs and one pool,
keeps the cluster full with a steady stream of 1-GPU jobs (`sleep 20`, `exec_timeout: 1m`,
submitted 10 % faster than the cluster finishes them), then submits a gang of G tasks x 8 GPUs
at the same priority. It prints the seconds from the gang's submission to its start, the GPU
utilization over the run (held: sampled from `GET /api/cluster/nodes`; running a job: the
GPU-seconds inside the jobs' `sleep`, from their start and end times) and the small jobs'
median wait, whether the stream was sustained (jobs submitted, started and ended a second
against what the cluster allows) and how long a small job held its GPU, after checking what it
measured: the gang's tasks run on G distinct nodes, no small job failed, every sample adds up.

    python benchmarks/gang_start.py                       # 16 nodes, a gang of 8 x 8 GPUs
    python benchmarks/gang_start.py --nodes 512 --gang 64 --groups 8
    python benchmarks/gang_start.py --source /tmp/main    # the same against another checkout

`--source` runs the product from another checkout (e.g. the main branch exported with
`git archive`) with this interpreter, for a before/after on the same machine and load.
`--groups K` submits the small jobs K to a workflow (K independent 1-GPU groups, each its own
gang) so that a large cluster can be kept full with fewer HTTP requests.
Slurm is not run here: what is printed for it is a reference, named with its source and date
(a measurement on this machine in the same scenario, stock and tuned backfill, ten runs), never
a figure of this run. A gang that does not start within `--limit` is a failure: a non-zero
exit and no figure. The small jobs' wait counts those submitted since the gang that never
started, each as waiting until the end of the run (so the median is a lower bound).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import fail_on, waits_since  # noqa: E402

SLURM = ("Slurm, not run here — a reference from commit bba3c6a (2026-11-26), Slurm backfill "
         "on this machine in the same scenario, 10 runs: gang start 15-21 s, 83-95 % busy")
SMALL_SECONDS, SMALL_TIMEOUT = 20, "1m"


def small_spec(name: str, groups: int) -> str:
    lines = "\n".join(f"  - name: g{i}\n    tasks:\n    - {{name: t{i}, image: x, command: "
                      f"[sleep, '{SMALL_SECONDS}'], resource: r}}" for i in range(groups))
    return (f"workflow:\n  name: {name}\n  timeout: {{exec_timeout: {SMALL_TIMEOUT}}}\n"
            f"  groups:\n{lines}\n  resources:\n    r: {{gpu: 1, cpu: 1, memory: 1Gi}}\n")


def gang_spec(tasks: int, seconds: int) -> str:
    lines = "\n".join(f"    - {{name: w{i}, image: x, command: [sleep, '{seconds}'], "
                      f"resource: r{', lead: true' if i == 0 else ''}}}" for i in range(tasks))
    return (f"workflow:\n  name: gang\n  timeout: {{exec_timeout: 10m}}\n  groups:\n"
            f"  - name: train\n    tasks:\n{lines}\n  resources:\n"
            f"    r: {{gpu: 8, cpu: 8, memory: 64Gi}}\n")


def parse_time(text: str | None) -> float | None:
    """The API's times: naive UTC ISO 8601."""
    return None if not text else datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


class Product:
    """`osmo standalone` on a throwaway data folder and a free port, from `source`."""

    def __init__(self, source: Path, port: int):
        self.data = tempfile.mkdtemp(prefix="osmo-gang-bench-")
        env = dict(os.environ, OSMO_LOG_LEVEL="WARNING", PYTHONPATH=str(source),
                   OSMO_SCHEDULER_INTERVAL="1")
        env.pop("DATABASE_URL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from osmo.cli.main import main; "
                                   "sys.exit(main())",
             "standalone", "--no-demo", "--port", str(port), "--data-dir", self.data],
            cwd=str(source), env=env, stdout=subprocess.PIPE, text=True,
            start_new_session=True)
        self.base = f"http://127.0.0.1:{port}"
        self.token = None
        deadline = time.monotonic() + 180
        while self.token is None and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line and self.process.poll() is not None:
                raise SystemExit("osmo standalone ended before it was ready")
            if line.startswith("token: "):
                self.token = line.split(" ", 1)[1].strip()
        if self.token is None:
            raise SystemExit("osmo standalone was not ready within 180 s")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        shutil.rmtree(self.data, ignore_errors=True)


class Run:
    def __init__(self, product: Product, args):
        self.args = args
        self.http = httpx.Client(base_url=product.base, timeout=60,
                                 headers={"Authorization": f"Bearer {product.token}"})
        self.capacity = args.nodes * 8
        self.small: list[str] = []
        self.samples: list[tuple[float, float]] = []
        self.cycles: dict[str, float] = {}  # cycle time -> its duration (ms)
        self.sent = 0
        self.began = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.dropped: list[str] = []

    def setup(self) -> None:
        for i in range(self.args.nodes):
            response = self.http.post("/api/cluster/nodes", json={
                "name": f"n{i:03d}", "gpus": 8, "cpu": 128, "memory": "1Ti",
                "labels": {"kubernetes.io/hostname": f"n{i:03d}",
                           "topology.osmo/rack": f"r{i // 16}"}})
            assert response.status_code in (200, 201), response.text
        response = self.http.put("/api/configs/pool/bench", json={"quota_gpus": self.capacity})
        assert response.status_code in (200, 201), response.text

    def submit(self, text: str) -> tuple[str, float]:
        try:
            response = self.http.post("/api/pool/bench/workflow", json={"file": text})
        except httpx.HTTPError as error:  # a loaded machine drops a connection now and then
            self.dropped.append(str(error))
            return "", 0.0
        if response.status_code != 201:
            self.errors.append(f"submit {response.status_code}: {response.text[:200]}")
            return "", 0.0
        body = response.json()
        return body["name"], parse_time(body["submit_time"])

    def stream(self, started: float) -> None:
        """Small jobs 10 % faster than the cluster finishes them: it stays full (one of
        `--clients` threads sharing the schedule)."""
        groups = self.args.groups
        per_second = self.capacity / SMALL_SECONDS * 1.1 / groups
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * per_second) + 1
            with self.lock:
                mine = self.sent if self.sent < due else None
                if mine is not None:
                    self.sent += 1
            if mine is None:
                time.sleep(0.05)
                continue
            name, _at = self.submit(small_spec(f"small{mine}", groups))
            if name:
                self.small.append(name)

    def sample(self) -> None:
        while not self.stop.is_set():
            try:
                nodes = self.http.get("/api/cluster/nodes").json()
                last = self.http.get("/api/scheduler/status").json().get("last_cycle") or {}
            except httpx.HTTPError:
                time.sleep(1.0)
                continue
            total = sum(node["gpus"] for node in nodes)
            used = sum(node["gpus"] - node["gpus_free"] for node in nodes)
            assert total == self.capacity and 0 <= used <= total, (total, used)
            self.samples.append((time.time(), used / total))
            if last:
                self.cycles[last["at"]] = last["duration_ms"]
            time.sleep(1.0)

    def go(self) -> dict:
        args = self.args
        self.setup()
        began, self.began = time.monotonic(), time.time()
        threads = [threading.Thread(target=self.stream, args=(began,), daemon=True)
                   for _ in range(args.clients)]
        threads.append(threading.Thread(target=self.sample, daemon=True))
        for thread in threads:
            thread.start()
        time.sleep(args.warmup)  # the cluster fills
        gang, submitted = self.submit(gang_spec(args.gang, args.gang_seconds))
        assert gang, self.errors
        start = None
        deadline = time.monotonic() + args.limit
        while start is None and time.monotonic() < deadline:
            body = self.http.get(f"/api/workflow/{gang}").json()
            tasks = body["groups"][0]["tasks"]
            if all(task["status"] == "RUNNING" for task in tasks):
                start = max(parse_time(task["start_time"]) for task in tasks)
                nodes = {task["node"] for task in tasks}
                assert len(nodes) == args.gang, f"gang on {len(nodes)} nodes"
            else:
                time.sleep(0.5)
        time.sleep(args.after)
        self.stop.set()
        for thread in threads:
            thread.join(30)
        return {"gang": gang, "submitted": submitted, "start": start, "ended": time.time(),
                "explain": self.http.get(f"/api/workflow/{gang}/explain").json()}

    def small_tasks(self) -> list[tuple[float, float | None, float | None, str]]:
        """(submitted, started, ended, status) of every small job."""
        tasks, offset = [], 0
        while True:
            page = self.http.get("/api/workflow", params={"pool": "bench", "limit": 1000,
                                                          "offset": offset}).json()
            for body in page["results"]:
                if not body["name"].startswith("small"):
                    continue
                submitted = parse_time(body["submit_time"])
                for group in body["groups"]:
                    task = group["tasks"][0]
                    tasks.append((submitted, parse_time(task["start_time"]),
                                  parse_time(task["end_time"]), task["status"]))
            if not page["next"]:
                return tasks
            offset += 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--gang", type=int, default=8, help="tasks of 8 GPUs in the gang")
    parser.add_argument("--gang-seconds", type=int, default=60, help="how long the gang runs")
    parser.add_argument("--groups", type=int, default=1, help="small jobs per workflow")
    parser.add_argument("--clients", type=int, default=1, help="threads submitting them")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds before the gang")
    parser.add_argument("--after", type=float, default=30.0,
                        help="seconds the stream goes on after the gang started")
    parser.add_argument("--limit", type=float, default=180.0,
                        help="give up on the gang after this many seconds")
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="the checkout whose product runs (default: this one)")
    args = parser.parse_args()
    load = os.getloadavg()
    if not args.port:
        from osmo.embedded import free_port

        args.port = free_port()
    product = Product(args.source.resolve(), args.port)
    try:
        run = Run(product, args)
        result = run.go()
        small = run.small_tasks()
    finally:
        product.stop()
    assert not run.errors, run.errors[:3]
    failed = sum(status.startswith("FAILED") for _, _, _, status in small)
    assert failed == 0, f"{failed} small jobs failed"
    since, until = result["submitted"], result["ended"]
    if result["start"] is None:
        reasons = result["explain"]["groups"][0]["reasons"]
        fail_on("gang start", [f"the gang did not start within {args.limit:.0f} s ("
                               f"{reasons[0]['message'] if reasons else 'no reason'})"])
    waits, unstarted = waits_since(small, since, until)
    assert waits, "no small job was submitted after the gang"
    window = [value for at, value in run.samples if at >= since]
    assert len(window) >= 10, "too few utilization samples"
    print(f"{args.nodes} nodes x 8 GPUs, gang of {args.gang} x 8 GPUs, small jobs 1 GPU "
          f"sleep {SMALL_SECONDS} s exec_timeout {SMALL_TIMEOUT}, {args.groups} per workflow, "
          f"{args.clients} submitting clients; product from {args.source.resolve()}; load "
          f"average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"gang start: {result['start'] - result['submitted']:.1f} s after submission "
          f"(target <= 45 s)")
    span = until - since
    # GPU-seconds of the window the gang held, and those small jobs spent in their `sleep`.
    gang_held = args.gang * 8 * max(
        0.0, min(until, result["start"] + args.gang_seconds) - result["start"])
    working = sum(max(0.0, min(until, start + SMALL_SECONDS, end or until) - max(since, start))
                  for _, start, end, _ in small if start is not None)
    print(f"GPU utilization from the gang's submission to the end: held "
          f"{statistics.fmean(window):.3f} (target >= 0.9; {len(window)} samples), running "
          f"a job {(working + gang_held) / (run.capacity * span):.3f}")
    asked = run.capacity / SMALL_SECONDS * 1.1
    started = sum(1 for _, start, _, _ in small if start is not None and since <= start <= until)
    ended = sum(1 for _, _, end, _ in small if end is not None and since <= end <= until)
    room = (run.capacity * span - gang_held) / SMALL_SECONDS / span
    print(f"stream: {len(run.small) * args.groups / (until - run.began):.1f} small jobs "
          f"submitted/s (asked {asked:.1f}/s); in the window {started / span:.1f} started/s, "
          f"{ended / span:.1f} ended/s (the GPUs the gang leaves allow {room:.1f}/s)")
    p90 = statistics.quantiles(waits, n=10)[-1] if len(waits) > 1 else waits[0]
    print(f"small jobs submitted since the gang: {len(waits)}, {unstarted} never started (counted"
          f" as waiting until the end): median wait {statistics.median(waits):.1f} s, p90 "
          f"{p90:.1f} s")
    held = [end - start for _, start, end, status in small
            if end is not None and status == "COMPLETED" and start >= since]
    if len(held) > 1:  # beyond their sleep: how late the loop noticed them end
        print(f"small jobs' GPUs held per job (they sleep {SMALL_SECONDS} s): median "
              f"{statistics.median(held):.1f} s, p90 {statistics.quantiles(held, n=10)[-1]:.1f}"
              f" s")
    if run.dropped:
        print(f"{len(run.dropped)} submissions got no answer (connection dropped), e.g. "
              f"{run.dropped[0]}")
    durations = list(run.cycles.values())
    print(f"scheduling cycles seen: {len(durations)}, median {statistics.median(durations):.0f} "
          f"ms, max {max(durations):.0f} ms (interval 1 s)")
    print(SLURM)


if __name__ == "__main__":
    main()
