"""Task logs, as a user meets them: `osmo standalone --demo` started as the README says, then

1. first byte of `GET /api/workflow/{name}/logs` for a running task (p50, p99);
2. a 100 MiB task log served with `last_n_lines=100`, and in full (time, and the web workers'
   peak memory, VmHWM, before and after);
3. submit latency (p99) alone, then while 50 clients follow running tasks' logs.

Each figure is taken after its result is checked (the lines served are the expected ones). The
machine is shared: give `uptime` with the figures. No peer is named for this figure.

    python benchmarks/logs.py [--first-byte 200] [--submits 200] [--followers 50]
"""

from __future__ import annotations

import argparse
import os
import re
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
from osmo.embedded import free_port  # noqa: E402

LINE = re.compile(rb"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[[^\]]+\] ")
RUNNING = """workflow:
  name: {name}
  tasks:
  - {{name: main, image: ubuntu, command: [python, train.py], resource: gpu}}
  resources:
    gpu: {{gpu: 1, cpu: 1, memory: 1Gi}}
"""
SMALL = """workflow:
  name: sub
  tasks:
  - {name: main, image: ubuntu, command: [sleep, "1"], resource: cpu}
  resources:
    cpu: {gpu: 0, cpu: 1, memory: 1Gi}
"""


class Standalone:
    """`osmo standalone --demo` on a free port and a throwaway data folder."""

    def __init__(self):
        self.data = Path(tempfile.mkdtemp(prefix="osmo-bench-logs-"))
        self.port = free_port()
        self.out = open(self.data / "standalone.log", "w+")  # noqa: SIM115
        env = dict(os.environ, OSMO_SIM_TASK_SECONDS="3600", OSMO_SIM_LOG_INTERVAL="1",
                   OSMO_LOG_LEVEL="WARNING")
        env.pop("DATABASE_URL", None)
        self.process = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "osmo"), "standalone", "--demo", "--port",
             str(self.port), "--data-dir", str(self.data)], stdout=self.out,
            stderr=subprocess.STDOUT, start_new_session=True, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = self._token()

    def _token(self) -> str:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            self.out.seek(0)
            found = re.search(r"^token: (\S+)$", self.out.read(), re.M)
            if found:
                return found[1]
            time.sleep(0.5)
        raise RuntimeError("osmo standalone did not print its token")

    def workers(self) -> list[psutil.Process]:
        return [p for p in psutil.Process(self.process.pid).children(recursive=True)
                if "gunicorn" in " ".join(p.cmdline()) and p.parent() and
                "gunicorn" in " ".join(p.parent().cmdline())]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


def vm_hwm_mib(process: psutil.Process) -> float:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--first-byte", type=int, default=200)
    parser.add_argument("--submits", type=int, default=200)
    parser.add_argument("--followers", type=int, default=50)
    parser.add_argument("--log-mib", type=int, default=100)
    args = parser.parse_args()

    server = Standalone()
    headers = {"Authorization": f"Bearer {server.token}"}
    http = httpx.Client(base_url=server.url, headers=headers, timeout=120)
    try:
        names = []
        for index in range(args.followers):
            # LOW: opportunistic, so all of them run beside the demo pool's quota
            response = http.post("/api/pool/team/workflow", params={"priority": "LOW"},
                                 json={"file": RUNNING.format(name=f"run{index}")})
            assert response.status_code == 201, response.text
            names.append(response.json()["name"])
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # running, and printed their first lines
            text = http.get(f"/api/workflow/{names[-1]}/logs",
                            params={"follow": "false"}).content
            if text.count(b"\n") >= 2:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("the tasks did not start printing")

        # 1. first byte of a running task's log (it follows: the stream is then dropped)
        first = []
        for index in range(args.first_byte):
            started = time.perf_counter()
            with http.stream("GET", f"/api/workflow/{names[index % len(names)]}/logs",
                             params={"task_name": "main"}) as response:
                assert response.status_code == 200, response.status_code
                chunk = next(response.iter_bytes())
                first.append((time.perf_counter() - started) * 1000)
                assert LINE.match(chunk), chunk[:80]

        # 2. a 100 MiB log, written through the store as a backend writes it
        big = names[0]
        before = {p.pid: vm_hwm_mib(p) for p in server.workers()}
        subprocess.run([sys.executable, "-c", WRITE_BIG, big, str(args.log_mib)], check=True,
                       env=dict(os.environ, OSMO_DATA_DIR=str(server.data),
                                OSMO_LOG_LEVEL="WARNING"), cwd=str(ROOT))
        started = time.perf_counter()
        tail = http.get(f"/api/workflow/{big}/logs",
                        params={"task_name": "main", "last_n_lines": 100, "follow": "false"})
        tail_ms = (time.perf_counter() - started) * 1000
        lines = tail.content.splitlines()
        # the last 100 lines: the big log's end (and progress lines the task printed since)
        assert len(lines) == 100 and all(LINE.match(line) for line in lines)
        assert any(line.endswith(b"line 99999") for line in lines), lines[-3:]
        after_tail = {p.pid: vm_hwm_mib(p) for p in server.workers()}
        started = time.perf_counter()
        size = 0
        with http.stream("GET", f"/api/workflow/{big}/logs",
                         params={"task_name": "main", "follow": "false"}) as response:
            for chunk in response.iter_bytes():
                size += len(chunk)
        full_s = time.perf_counter() - started
        assert size >= args.log_mib * 1024 * 1024, size
        after_full = {p.pid: vm_hwm_mib(p) for p in server.workers()}

        # 3. submit p99 alone, then with 50 followers
        def submits() -> list[float]:
            took = []
            for _ in range(args.submits):
                started = time.perf_counter()
                response = http.post("/api/pool/team/workflow", json={"file": SMALL})
                took.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 201, response.text
            return took

        alone = submits()
        stop = threading.Event()
        received = [0] * args.followers
        refused = []

        def follow(index: int) -> None:
            try:
                _follow(index)
            except httpx.HTTPError:
                if not stop.is_set():
                    refused.append("broken")

        def _follow(index: int) -> None:
            with httpx.Client(base_url=server.url, headers=headers, timeout=None) as own:
                while not stop.is_set():
                    with own.stream("GET", f"/api/workflow/{names[index]}/logs",
                                    params={"task_name": "main"}) as response:
                        if response.status_code != 200:
                            refused.append(response.status_code)
                            return
                        for chunk in response.iter_bytes():
                            received[index] += chunk.count(b"\n")
                            if stop.is_set():
                                return

        followers = [threading.Thread(target=follow, args=(i,), daemon=True)
                     for i in range(args.followers)]
        for thread in followers:
            thread.start()
        time.sleep(3)
        during = submits()
        time.sleep(2)
        assert not refused, refused
        stop.set()
        assert all(count >= 3 for count in received), received  # every one kept receiving
        load = os.getloadavg()
    finally:
        http.close()
        server.stop()

    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"(2 cores, shared with other work)")
    print(f"first byte of a running task's log ({args.first_byte} requests): "
          f"p50 {percentile(first, 0.5):.1f} ms, p99 {percentile(first, 0.99):.1f} ms")
    print(f"{args.log_mib} MiB log, last_n_lines=100: {tail_ms:.0f} ms; in full: "
          f"{full_s:.1f} s ({args.log_mib / full_s:.0f} MiB/s)")
    for pid in before:
        print(f"  web worker {pid} VmHWM: {before[pid]:.0f} MiB before, "
              f"{after_tail.get(pid, 0):.0f} after the tail, {after_full.get(pid, 0):.0f} "
              f"after the full read")
    print(f"submit ({args.submits} sequential): p50 {percentile(alone, 0.5):.1f} ms, "
          f"p99 {percentile(alone, 0.99):.1f} ms alone; with {args.followers} followers: "
          f"p50 {percentile(during, 0.5):.1f} ms, p99 {percentile(during, 0.99):.1f} ms "
          f"(followers received {min(received)}..{max(received)} lines each)")


# Run in a child beside the server (manage.py-style: joins its embedded PostgreSQL).
WRITE_BIG = """
import os, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
from osmo.embedded import prepare_local_environment
prepare_local_environment()
django.setup()
from workflows import logstore
from workflows.models import Task
from django.utils import timezone
task = Task.objects.get(workflow__name=sys.argv[1], name="main")
mib = int(sys.argv[2])
now = timezone.now()
pad = "x" * (mib * 1024 * 1024 // 100_000 - 28)
lines = [logstore.format_line(now, "main", f"{pad} line {i}") for i in range(100_000)]
for start in range(0, len(lines), 5000):
    logstore.log_append(task=task, text="".join(lines[start:start + 5000]))
"""


if __name__ == "__main__":
    main()
