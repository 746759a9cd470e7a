"""Real Celery processes for the background-job tests: a worker (and beat) started as
subprocesses against the test database and the test broker, killed in teardown.

Tests that use them are `transaction=True`: the worker has its own connection and only sees
committed rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests import environment

REPO = Path(__file__).resolve().parents[2]
READY_SECONDS = 30


def wait_for(predicate: Callable[[], object], timeout: float, what: str, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def session_database_url() -> str:
    """The URL of the database this test session really uses (pytest-django's `test_...`)."""
    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = quote(db["HOST"] or "", safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgresql://{credentials}@{host}{port}/{quote(db['NAME'], safe='')}"


class CeleryProcess:
    """One `celery -A osmo ...` subprocess in its own process group, logging to a file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path):
        self.name, self.log = name, log
        self._log_file = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "osmo", *args], cwd=REPO, env=env,
            stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = READY_SECONDS) -> None:
        def seen() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.output()[-3000:]}")
            return text in self.output()

        wait_for(seen, timeout, f"{text!r} in the {self.name} log")

    def stop(self) -> None:
        if self.process.poll() is None:
            # The group: nothing of ours may outlive the test (prefork children included).
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self._log_file.close()


@pytest.fixture
def celery_env(broker_url, transactional_db) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OSMO_", "CELERY_"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "osmo.settings",
        "DATABASE_URL": session_database_url(),
        "REDIS_URL": broker_url,
        "CELERY_BROKER_URL": broker_url,
        "SECRET_KEY": os.environ["SECRET_KEY"],
        "OSMO_DATA_DIR": os.environ["OSMO_DATA_DIR"],
        # No pooled connections left behind: the test's flush and the final DROP DATABASE
        # must not wait on a worker's idle session.
        "OSMO_DB_CONN_MAX_AGE": "0",
        "OSMO_LOG_LEVEL": "INFO",
    })
    return env


@pytest.fixture
def purged_queue(broker_url) -> None:
    """Start from an empty queue: messages other tests left must not do a test's work."""
    import redis

    client = redis.Redis.from_url(broker_url)
    try:
        client.delete("celery")
    finally:
        client.close()


@pytest.fixture
def start_celery(celery_env, purged_queue, tmp_path) -> Iterator[Callable[..., CeleryProcess]]:
    """Start workers (`start_celery("worker", name)`) or beat (`start_celery("beat")`)."""
    started: list[CeleryProcess] = []

    def start(kind: str, name: str = "w1", **env: str) -> CeleryProcess:
        merged = {**celery_env, **env}
        if kind == "worker":
            args = ["worker", "-P", "solo", "-n", f"{name}@%h", "-l", "INFO",
                    "--without-gossip", "--without-mingle", "--without-heartbeat"]
            ready = " ready."
        else:
            args = ["beat", "-l", "INFO", "-s", str(tmp_path / f"beat-{name}"),
                    "--max-interval", "1"]
            ready = "beat: Starting"
        process = CeleryProcess(f"{kind} {name}", args, merged, tmp_path / f"{kind}-{name}.log")
        started.append(process)
        process.wait_for_log(ready)
        return process

    yield start
    for process in started:
        process.stop()


class RestartableBroker:
    """The session's embedded broker, stopped and started again on the same port."""

    def __init__(self):
        from tests import conftest

        self._servers = conftest._servers

    def stop(self) -> None:
        self._servers["broker"].stop()

    def start(self) -> None:
        from osmo.embedded import start_broker

        def started():
            try:
                self._servers["broker"] = start_broker(environment.WORK_DIR / "broker",
                                                       port=environment.BROKER_PORT)
            except Exception:  # noqa: BLE001 - the old listener may not have let go of the port
                return False
            return True

        wait_for(started, 15, "the broker to start again", step=0.5)

    def is_running(self) -> bool:
        return self._servers["broker"].is_running()


@pytest.fixture
def restartable_broker(broker_url) -> Iterator[RestartableBroker]:
    if not environment.OWN_BROKER:
        pytest.skip("REDIS_URL points at an outside broker: the suite cannot restart it")
    broker = RestartableBroker()
    yield broker
    if not broker.is_running():  # other tests need it
        broker.start()
