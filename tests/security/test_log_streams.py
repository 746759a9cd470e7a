"""Followed logs on a real gunicorn: a client that stops reading is dropped after
OSMO_LOG_SEND_TIMEOUT, one that hangs up while no lines come is dropped at the next poll; their
threads and stream slots come back, and other requests are served meanwhile."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from osmo.accounts import services as accounts
from tests import factories
from tests.background.conftest import wait_for
from tests.security.gunicorn import gunicorn
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
    with gunicorn(tmp_path, threads=3, env={"OSMO_LOG_SEND_TIMEOUT": "2",
                                            "OSMO_LOG_STREAMS_PER_PROCESS": "1"}) as (base, _):
        yield base, token, workflow.name


def test_a_client_that_stops_reading_frees_its_thread_and_slot(server):
    base, token, name = server
    auth = {"Authorization": f"Bearer {token}"}
    stalled = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
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
    base, token, name = server
    auth = {"Authorization": f"Bearer {token}"}
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


@pytest.fixture
def two_workers(transactional_db, tmp_path):
    """Two web processes; alice and bob may each see a running and a pending workflow."""
    team = factories.pool("team", 100)
    running = factories.running_workflow(team, 1)
    pending = factories.pending_workflow(team, 1)
    tokens = {}
    for username in ("alice", "bob"):
        user = accounts.user_ensure(username=username, groups=["osmo-team-user"])
        tokens[username] = {"Authorization": f"Bearer {accounts.token_issue(user=user)}"}
    with gunicorn(tmp_path, workers=2, threads=4,
                  env={"OSMO_LOG_STREAMS_PER_USER": "2",
                       "OSMO_LOG_STREAMS_PER_PROCESS": "4"}) as (base, _):
        yield base, tokens, running.name, pending.name


def test_a_user_at_their_bound_gets_429_while_another_still_follows(two_workers):
    base, tokens, name, _ = two_workers
    url = f"{base}/api/workflow/{name}/logs"
    with httpx.Client(timeout=10) as one, httpx.Client(timeout=10) as two, \
            one.stream("GET", url, headers=tokens["alice"]) as first, \
            two.stream("GET", url, headers=tokens["alice"]) as second:
        assert (first.status_code, second.status_code) == (200, 200)  # both follow
        # a third of alice's, on whichever process: her bound holds across them
        for _ in range(4):
            refused = httpx.get(url, headers=tokens["alice"], timeout=10)
            assert refused.status_code == 429
            assert refused.json()["code"] == "too_many_user_streams"
        with httpx.stream("GET", url, headers=tokens["bob"], timeout=10) as bob:
            assert bob.status_code == 200  # another tenant still follows
        plain = httpx.get(url, headers=tokens["alice"], params={"follow": "false"}, timeout=10)
        assert plain.status_code == 200  # a plain read needs no lease
    # alice hung up on both: her leases come back
    wait_for(lambda: _follows(url, tokens["alice"]), 10, "alice's leases to come back")


def _follows(url: str, headers: dict) -> bool:
    with httpx.stream("GET", url, headers=headers, timeout=10) as response:
        return response.status_code == 200


def test_a_pending_tasks_log_answers_at_once(two_workers):
    base, tokens, _, pending = two_workers
    started = time.monotonic()
    with httpx.stream("GET", f"{base}/api/workflow/{pending}/logs", headers=tokens["bob"],
                      params={"task_name": "task-0"},
                      timeout=httpx.Timeout(10, read=3)) as response:
        assert response.status_code == 200  # the status line and headers, at once
        assert time.monotonic() - started < 3
        assert response.headers["content-type"] == "text/plain; charset=utf-8"
        first = next(response.iter_lines())
    assert first.endswith("[task-0][osmo] Task task-0 has not started yet (WAITING).")
