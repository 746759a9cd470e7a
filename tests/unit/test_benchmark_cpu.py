"""The benchmarks' CPU accounting: a process tree's CPU by part, read from the running
processes, and what a phase used between two readings."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

import psutil

from benchmarks import cpu

BURN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n" \
       "time.sleep(30)"


def part(command: str) -> str:
    return "worker" if command.endswith(" worker") else "parent"


def test_a_tree_is_read_by_part_and_a_phase_is_the_difference() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', {BURN!r}, 'worker'])\n"
                               "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while True:
            read = cpu.cpu_seconds([(parent.pid, part)], own="harness")
            if read["worker"] >= 0.45 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert set(read) == {"worker", "parent", "harness"}
        assert 0.45 <= read["worker"] < 1.2  # its busy loop (in clock ticks), then asleep
        assert read["parent"] < read["worker"]
        later = cpu.cpu_seconds([(parent.pid, part)])
        assert set(later) == {"worker", "parent"}
        assert cpu.spent(read, later)["worker"] < 0.1  # asleep since the first reading
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()
    assert cpu.cpu_seconds([(parent.pid, part)]) == Counter()  # gone: nothing read


def test_the_standalone_processes_are_named_by_role() -> None:
    python = "/srv/.venv/bin/python3"
    assert [cpu.product_part(command) for command in (
        f"{python} -m gunicorn osmo.wsgi:application --config python:osmo.gunicorn_config",
        f"{python} /srv/manage.py run_k8s_backend",
        f"{python} -B -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=12)",
        f"{python} -m celery -A osmo worker --loglevel INFO",
        "postgres: postgres osmo [local] idle",
        f"{python} /srv/.venv/bin/osmo standalone --no-demo --port 8000",
    )] == ["web", "backend", "scheduler", "Celery", "PostgreSQL", "supervisor and broker"]


def test_the_description_adds_the_parts_and_divides_by_the_time() -> None:
    text = cpu.describe(Counter({"web": 6.0, "API server": 10.0, "etcd": 0.0}), 8.0)
    assert text.startswith("API server 10.0, web 6.0 — 16.0 in all, 2.0 of ")
    assert text.endswith(" CPUs over 8.0 s")
