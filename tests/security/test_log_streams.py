"""Followed logs on a real gunicorn: a client that stops reading is dropped after
OSMO_LOG_SEND_TIMEOUT, one that hangs up while no lines come is dropped at the next poll; their
threads and stream slots come back, and other requests are served meanwhile."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from osmo.accounts import services as accounts
from osmo.embedded import free_port
from tests import factories
from tests.background.conftest import session_database_url, wait_for
from workflows import logstore
from workflows.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(transactional_db, tmp_path):
    team = factories.pool("team", 100)
    workflow = factories.running_workflow(team, 1)
    task = Task.objects.get(workflow=workflow)
    line = logstore.format_line(workflow.submitted_at, task.name, "x" * 1000)
    for _ in range(24):  # 24 MiB: more than the sockets' buffers hold
        logstore.log_append(task=task, text=line * 1024)
    user = accounts.user_ensure(username="alice", groups=["osmo-team-user"])
    token = accounts.token_issue(user=user)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSMO_")}
    env.update(DATABASE_URL=session_database_url(), OSMO_DB_CONN_MAX_AGE="0",
               OSMO_DATA_DIR=str(tmp_path), OSMO_LOG_LEVEL="WARNING",
               OSMO_LOG_SEND_TIMEOUT="2", OSMO_LOG_STREAMS_PER_PROCESS="1")
    log = open(tmp_path / "web.log", "wb")  # noqa: SIM115 - closed in the finalizer
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "osmo.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", "1", "--threads", "3", "--timeout", "60"],
        env=env, stdout=log, stderr=log, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/api/health", timeout=1).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 30, "gunicorn to answer")
        yield port, token, workflow.name
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
        log.close()


def test_a_client_that_stops_reading_frees_its_thread_and_slot(server):
    port, token, name = server
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(f"GET /api/workflow/{name}/logs HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {token}\r\n\r\n".encode())
    time.sleep(1)  # it follows (the task runs) and its buffers fill: it holds the only slot
    refused = httpx.get(f"{base}/api/workflow/{name}/logs", headers=auth, timeout=10)
    assert (refused.status_code, refused.json()["code"]) == (429, "too_many_streams")
    assert httpx.get(f"{base}/api/health", timeout=5).status_code in (200, 503)  # answered

    def slot_back() -> bool:
        with httpx.stream("GET", f"{base}/api/workflow/{name}/logs", headers=auth,
                          params={"last_n_lines": 1}, timeout=10) as response:
            return response.status_code == 200
    started = time.monotonic()
    wait_for(slot_back, 20, "the stalled stream to be dropped")
    assert time.monotonic() - started < 15
    stalled.close()


def test_a_client_that_hangs_up_while_waiting_frees_its_slot(server):
    port, token, name = server
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", f"{base}/api/workflow/{name}/logs", headers=auth,
                      params={"last_n_lines": 1}, timeout=10) as response:
        assert response.status_code == 200
        next(response.iter_bytes())  # the last line; then it waits for more
    # hung up: no line comes, yet the server lets go of the slot within a poll or two
    time.sleep(2.5)
    again = httpx.get(f"{base}/api/workflow/{name}/logs", headers=auth,
                      params={"follow": "false", "last_n_lines": 1}, timeout=10)
    assert again.status_code == 200
    with httpx.stream("GET", f"{base}/api/workflow/{name}/logs", headers=auth,
                      params={"last_n_lines": 1}, timeout=10) as followed:
        assert followed.status_code == 200  # not 429: the slot came back
