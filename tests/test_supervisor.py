"""osmo.supervisor on its own: backoff, restarts, children ending with a killed supervisor,
and the orphans of a crashed child reaped. Small real processes, a few seconds in all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from osmo.supervisor import Backoff, Child, Supervisor, Watched, end_leftovers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_backoff_doubles_up_to_the_maximum_and_starts_over_after_a_stable_run():
    backoff = Backoff(first=1, maximum=30, stable=60)
    assert [backoff.after_exit(uptime=2) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.after_exit(uptime=60) == 1
    assert backoff.after_exit(uptime=0.5) == 2


@pytest.fixture
def supervisor(tmp_path: Path):
    log = (tmp_path / "supervisor.log").open("w")
    supervisor = Supervisor(name="test", log=log, state_path=tmp_path / "children.json")
    yield supervisor
    supervisor.stop(grace=5)
    log.close()


def test_an_exited_child_is_restarted_with_backoff_and_a_log_line(supervisor, tmp_path):
    child = supervisor.start(Child("quitter", [sys.executable, "-c", "raise SystemExit(3)"],
                                   backoff=Backoff(first=0.2, maximum=0.4, stable=60)))
    first = child.pid
    deadline = time.monotonic() + 10
    while child.restarts < 3:
        assert time.monotonic() < deadline
        supervisor.poll()
        time.sleep(0.02)
    lines = (tmp_path / "supervisor.log").read_text().splitlines()
    assert lines == [
        "test: quitter exited with exit code 3; restarting in 0.2 s (restart 1)",
        "test: quitter exited with exit code 3; restarting in 0.4 s (restart 2)",
        "test: quitter exited with exit code 3; restarting in 0.4 s (restart 3)",
    ]
    assert child.pid != first or child.process is None


def test_stop_ends_every_child_and_forgets_the_state(supervisor, tmp_path):
    children = [supervisor.start(Child(f"sleeper-{n}", SLEEPER)) for n in range(2)]
    processes = [psutil.Process(child.pid) for child in children]
    assert (tmp_path / "children.json").exists()
    supervisor.stop(grace=5)
    assert psutil.wait_procs(processes, timeout=5)[1] == []
    assert not (tmp_path / "children.json").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_children_end_with_a_supervisor_killed_by_sigkill(tmp_path: Path):
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from osmo.supervisor import Child, Supervisor
        supervisor = Supervisor(state_path=Path({str(tmp_path / "children.json")!r}))
        for name in ("a", "b"):
            supervisor.start(Child(name, {SLEEPER!r}))
        print(" ".join(str(child.pid) for child in supervisor.children), flush=True)
        while True:
            supervisor.poll()
            time.sleep(0.1)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    children = []
    try:
        children = [psutil.Process(int(pid)) for pid in parent.stdout.readline().split()]
        assert len(children) == 2
        time.sleep(0.5)  # past the wrapper: the sleepers run as themselves
        parent.kill()
        parent.wait(5)
        assert psutil.wait_procs(children, timeout=5)[1] == []
        # The record of a killed supervisor lets the next one end what is left (nothing here).
        assert end_leftovers(tmp_path / "children.json", timeout=1) == []
    finally:
        for child in children:
            if child.is_running():
                child.kill()
        if parent.poll() is None:
            parent.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux")
def test_the_orphans_of_a_crashed_child_are_reaped(tmp_path: Path):
    """A child forks a worker then dies by SIGKILL: the worker is adopted and stopped."""
    forker = textwrap.dedent(f"""
        import subprocess, time
        worker = subprocess.Popen({SLEEPER!r})
        print(worker.pid, flush=True)
        time.sleep(120)
    """)
    script = textwrap.dedent(f"""
        import sys, time
        from osmo.supervisor import Backoff, Child, Supervisor
        supervisor = Supervisor(adopt_orphans=True)
        child = supervisor.start(Child("forker", [sys.executable, "-c", {forker!r}],
                                       backoff=Backoff(first=60)))
        print(child.pid, flush=True)
        while True:
            supervisor.poll()
            if child.restarts and not supervisor.orphans:
                print("reaped", flush=True)
            time.sleep(0.05)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    leftovers = []
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        leftovers.append(child)
        deadline = time.monotonic() + 10
        while not child.children():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        worker = child.children()[0]
        leftovers.append(worker)
        os.kill(child.pid, signal.SIGKILL)
        assert psutil.wait_procs([worker], timeout=10)[1] == [], "stopped and reaped"
        assert parent.stdout.readline().strip() == "reaped"
    finally:
        for process in leftovers:
            if process.is_running():
                process.kill()
        parent.kill()
        parent.wait(5)


def test_a_watched_server_that_dies_is_started_again_with_backoff(tmp_path: Path):
    """A server that runs detached (as the embedded PostgreSQL) is watched by its pid: gone, it
    is started again after the backoff delay; a start that fails is tried again later."""
    now = [0.0]
    server = {"pid": 123, "starts": 0, "fail": 1}

    def start() -> None:
        server["starts"] += 1
        if server["fail"]:
            server["fail"] -= 1
            raise RuntimeError("the old backends still hold its memory")
        server["pid"] = 456

    log = tmp_path / "supervisor.log"
    with log.open("w") as stream:
        supervisor = Supervisor(name="test", log=stream, clock=lambda: now[0])
        supervisor.watch(Watched("db", lambda: server["pid"], start,
                                 backoff=Backoff(first=1, maximum=8, stable=60)))
        supervisor.poll()
        server["pid"] = None  # killed
        now[0] = 10
        supervisor.poll()  # seen: restart in 1 s
        supervisor.poll()
        assert server["starts"] == 0
        now[0] = 11
        supervisor.poll()  # the start fails: again in 2 s
        now[0] = 12
        supervisor.poll()
        assert (server["starts"], server["pid"]) == (1, None)
        now[0] = 13
        supervisor.poll()
        now[0] = 14
        supervisor.poll()  # running again: nothing more to do
    assert (server["starts"], server["pid"]) == (2, 456)
    assert log.read_text().splitlines() == [
        "test: db exited; restarting in 1 s (restart 1)",
        "test: db could not start (the old backends still hold its memory); retrying in 2 s"]
