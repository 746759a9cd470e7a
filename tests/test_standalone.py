"""`osmo standalone` end to end: one command, real processes, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from osmo.embedded import free_port


def _get(url: str, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return response.status, json.loads(response.read())


@pytest.mark.timeout(240)
def test_standalone_runs_everything_and_stops_cleanly(tmp_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    osmo = Path(sys.executable).with_name("osmo")
    log = tmp_path / "standalone.log"
    process = subprocess.Popen(
        [str(osmo), "standalone", "--port", str(port), "--data-dir", str(tmp_path / "data"),
         "--demo"], stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    try:
        ready = process.stdout.readline().strip()
        token_line = process.stdout.readline().strip()
        assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
        assert token_line.startswith("token: osmo_")
        token = token_line.removeprefix("token: ")
        descendants = psutil.Process(process.pid).children(recursive=True)
        names = " ".join(" ".join(p.cmdline()) for p in descendants)
        assert "gunicorn" in names and "worker" in names and "beat" in names
        assert "valkey-server" in names or "valkey" in names
        assert "run_scheduler" in names

        assert _get(f"http://127.0.0.1:{port}/api/health") == (
            200, {"status": "ok", "database": "ok", "broker": "ok"})
        status, report = _get(f"http://127.0.0.1:{port}/api/pool_quota", token)
        assert status == 200
        team = next(row for row in report["pools"] if row["name"] == "team")
        assert (team["total_quota_gpus"], team["quota_gpus"]) == (100, 10)
        status, nodes = _get(f"http://127.0.0.1:{port}/api/cluster/nodes", token)
        assert (len(nodes), sum(n["gpus"] for n in nodes)) == (32, 256)
        # The scheduler loop runs: a submitted workflow gets bound and runs.
        spec = ("workflow:\n  name: hello\n  tasks:\n  - {name: main, image: x, "
                "command: [sleep, '30'], resource: r}\n  resources:\n    r: {gpu: 1}\n")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/pool/team/workflow", method="POST",
            data=json.dumps({"file": spec}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            name = json.loads(response.read())["name"]
        deadline = time.monotonic() + 30
        while _get(f"http://127.0.0.1:{port}/api/workflow/{name}", token)[1][
                "status"] != "RUNNING":
            assert time.monotonic() < deadline, "the scheduler loop did not bind the workflow"
            time.sleep(0.5)
        postgres = [p for p in psutil.process_iter(["name", "cmdline"])
                    if p.info["name"] == "postgres"
                    and str(tmp_path / "data") in " ".join(p.info["cmdline"] or [])]
        assert postgres, "the embedded PostgreSQL should run under the data folder"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    time.sleep(1)
    leftovers = [p for p in descendants + postgres if p.is_running()
                 and p.status() != psutil.STATUS_ZOMBIE]
    assert leftovers == []


def _postgres_of(data_dir: Path) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "postgres"
            and str(data_dir) in " ".join(p.info["cmdline"] or [])]


@pytest.mark.timeout(240)
def test_sigterm_stops_the_embedded_postgres_even_with_a_stale_registration(tmp_path: Path):
    """A process that registered with the embedded PostgreSQL and died without unregistering
    (killed, say) must not keep it running after standalone stops."""
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    data = tmp_path / "data"
    log = tmp_path / "standalone.log"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("osmo")), "standalone", "--port", str(port),
         "--data-dir", str(data), "--no-demo", "--web-workers", "1"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    try:
        ready = process.stdout.readline().strip()
        assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
        postgres = _postgres_of(data)
        assert postgres
        handles = data / "pg" / ".handle_pids.json"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        handles.write_text(json.dumps([*json.loads(handles.read_text()), dead.pid]))
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    try:
        psutil.wait_procs(postgres, timeout=10)
        assert [p for p in postgres if p.is_running()] == [], "PostgreSQL kept running"
    finally:
        for leftover in _postgres_of(data):  # what this test started, by PID
            leftover.terminate()
