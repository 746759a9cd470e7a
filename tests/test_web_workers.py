"""The web's gunicorn workers (osmo.gunicorn_worker) on a real gunicorn: new connections are
spread evenly over the workers, a stopped worker does not hold them back, and a kept-alive
connection's requests are answered whether they come one after the other, pipelined in one
write, or after a pause longer than a thread lingers for them."""

from __future__ import annotations

import http.client
import socket
import time
from urllib.parse import urlsplit

import psutil
import pytest

from osmo import gunicorn_worker
from tests.background.conftest import wait_for
from tests.security.gunicorn import gunicorn

pytestmark = pytest.mark.django_db(transaction=True)

# Idle connections stay open while the test counts them.
KEEP_ALIVE = ("--keep-alive", "60")


def workers_of(master_pid: int, count: int) -> list[psutil.Process]:
    master = psutil.Process(master_pid)
    wait_for(lambda: len(master.children()) == count, 30, f"{count} workers")
    return master.children()


def held(workers: list[psutil.Process], port: int) -> list[int]:
    """The established connections each worker holds on the listening port."""
    return [sum(1 for c in worker.net_connections(kind="tcp")
                if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)
            for worker in workers]


def connect(base: str) -> http.client.HTTPConnection:
    """A connection that has been answered once (so a worker holds it) and stays open."""
    address = urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=20)
    connection.request("GET", "/api/health")
    response = connection.getresponse()
    response.read()
    assert response.status in (200, 503)
    assert response.getheader("Connection", "").lower() != "close"
    return connection


def test_new_connections_go_to_the_worker_holding_the_fewest(tmp_path):
    with gunicorn(tmp_path, workers=2, args=KEEP_ALIVE) as (base, pid):
        workers = workers_of(pid, 2)
        port = urlsplit(base).port
        connections = [connect(base) for _ in range(12)]
        try:
            # One after the other, each to the worker with fewer: gunicorn's own race gives
            # whichever wakes first, as often 10 and 2 as 6 and 6.
            assert held(workers, port) == [6, 6]
        finally:
            for connection in connections:
                connection.close()


def test_a_stopped_worker_does_not_hold_new_connections_back(tmp_path):
    with gunicorn(tmp_path, workers=2, args=KEEP_ALIVE) as (base, pid):
        workers = workers_of(pid, 2)
        port = urlsplit(base).port
        connections = [connect(base) for _ in range(2)]
        assert held(workers, port) == [1, 1]
        workers[0].suspend()
        try:
            started = time.monotonic()
            connections += [connect(base) for _ in range(3)]
            elapsed = time.monotonic() - started
            # The running worker left the second and third to the stopped one for
            # MAX_YIELD_SECONDS each, then took them.
            assert held(workers, port) == [1, 4]
            assert elapsed >= 2 * gunicorn_worker.MAX_YIELD_SECONDS
        finally:
            workers[0].resume()
            for connection in connections:
                connection.close()


REQUEST = b"GET /api/health HTTP/1.1\r\nHost: test\r\n\r\n"


def responses(sock: socket.socket, count: int) -> list[int]:
    """The status codes of the next ``count`` responses on ``sock``."""
    buffer, statuses = b"", []
    while len(statuses) < count:
        head_end = buffer.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buffer[:head_end].decode("latin1").split("\r\n")
            length = next(int(line.split(":", 1)[1]) for line in head
                          if line.lower().startswith("content-length:"))
            end = head_end + 4 + length
            if len(buffer) >= end:
                statuses.append(int(head[0].split()[1]))
                buffer = buffer[end:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection after {len(statuses)} responses"
        buffer += chunk
    assert buffer == b""
    return statuses


def test_a_kept_alive_connections_requests_are_all_answered(tmp_path):
    with gunicorn(tmp_path, workers=2, args=KEEP_ALIVE) as (base, _pid):
        address = urlsplit(base)
        with socket.create_connection((address.hostname, address.port), timeout=20) as sock:
            for _ in range(3):  # one after the other: the lingering thread serves them
                sock.sendall(REQUEST)
                assert responses(sock, 1)[0] in (200, 503)
            sock.sendall(REQUEST * 3)  # pipelined: read ahead in one go
            assert len(responses(sock, 3)) == 3
            time.sleep(gunicorn_worker.LINGER_MS / 1000 * 20)  # back to the main poller
            sock.sendall(REQUEST)
            assert responses(sock, 1)[0] in (200, 503)
