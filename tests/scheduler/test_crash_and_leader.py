"""A cycle that dies before commit leaves nothing behind; one loop instance is active at a time
and another takes over when it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from scheduler.backends.embedded import cycle as embedded_cycle
from scheduler.backends.embedded.loop import LEADER_LOCK
from scheduler.models import SchedulerCycle
from tests.scheduler.conftest import add_nodes, cycle, spec, submit
from workflows.models import Task

ROOT = Path(__file__).resolve().parents[2]


def bound() -> list[tuple[str, str]]:
    return sorted(Task.objects.exclude(node_name="").values_list("name", "node_name"))


@pytest.mark.django_db
def test_a_failure_between_decision_and_commit_rolls_the_cycle_back(admin, alice, team,
                                                                   monkeypatch):
    add_nodes(admin, 2)
    for index in range(3):
        submit(alice, "team", spec(f"w{index}", 8))

    def crash():
        raise RuntimeError("scheduler died before commit")

    monkeypatch.setattr(embedded_cycle, "_check_capacity", crash)
    with pytest.raises(RuntimeError):
        embedded_cycle.cycle_run()
    assert bound() == []  # the decisions were never committed
    assert not SchedulerCycle.objects.exists()
    monkeypatch.undo()
    assert cycle(admin)["bound"] == 2  # the next cycle converges from what is committed
    assert cycle(admin)["bound"] == 0
    assert len({node for _, node in bound()}) == 2


@pytest.mark.django_db
def test_the_capacity_guard_refuses_a_double_booking(admin, alice, team):
    add_nodes(admin, 1)
    first = submit(alice, "team", spec("first", 8))
    second = submit(alice, "team", spec("second", 8))
    cycle(admin)
    # Simulate a stale decision binding the second workflow onto the full node.
    Task.objects.filter(workflow__name=second).update(node_name="node-0")
    with pytest.raises(embedded_cycle.OverCommitError):
        embedded_cycle.cycle_run()
    assert SchedulerCycle.objects.get().bound == 1  # the earlier cycle's record, unchanged
    assert Task.objects.get(workflow__name=first).node_name == "node-0"


def _scheduler(env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "run_scheduler",
                             "--interval", "0.2"], env=env, cwd=str(ROOT),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _leader_pid() -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                       "WHERE l.locktype = 'advisory' AND l.objid = %s AND l.granted",
                       [LEADER_LOCK])
        rows = cursor.fetchall()
    assert len(rows) <= 1
    return rows[0][0] if rows else None


def _wait(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_one_active_loop_and_takeover_when_it_dies(admin):
    add_nodes(admin, 1)
    settings_dict = connection.settings_dict
    from osmo.embedded import postgres_url

    env = dict(os.environ, DATABASE_URL=postgres_url(settings_dict["HOST"],
                                                     settings_dict["PORT"],
                                                     settings_dict["NAME"]))
    first = _scheduler(env)
    try:
        _wait(lambda: SchedulerCycle.objects.exists())
        second = _scheduler(env)
        try:
            leader = _wait(_leader_pid)
            time.sleep(1.5)
            assert _leader_pid() == leader  # the second one waits
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            before = SchedulerCycle.objects.get().at
            new_leader = _wait(lambda: (pid := _leader_pid()) and pid != leader and pid)
            assert new_leader != leader
            _wait(lambda: SchedulerCycle.objects.get().at > before)  # cycles go on
        finally:
            second.terminate()
            second.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
