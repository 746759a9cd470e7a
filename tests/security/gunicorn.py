"""A real gunicorn serving the product against the test database, for the tests that need a
real worker (memory, CPU, sockets)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import httpx

from osmo.embedded import free_port
from tests.background.conftest import session_database_url, wait_for


@contextlib.contextmanager
def gunicorn(tmp_path, *, threads: int = 2, workers: int = 1, args: tuple[str, ...] = (),
             env: dict[str, str] | None = None):
    """Yields (base URL, the master process's pid)."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OSMO_")}
    environment.update(DATABASE_URL=session_database_url(), OSMO_DB_CONN_MAX_AGE="0",
                       OSMO_DATA_DIR=str(tmp_path), OSMO_LOG_LEVEL="WARNING", **(env or {}))
    log = open(tmp_path / "web.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "osmo.wsgi:application",
         "--config", "python:osmo.gunicorn_config", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--threads", str(threads), "--timeout", "60", *args],
        env=environment, stdout=log, stderr=log, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/api/health", timeout=1).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 30, "gunicorn to answer")
        yield base, process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
        log.close()
