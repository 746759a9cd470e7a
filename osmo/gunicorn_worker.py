"""gunicorn's threaded worker, with three changes:

- The errors gunicorn meets before the application runs are answered in the contract's
  `{code, detail}` shape: a request line over its limit (414), headers too large (431), a request
  it cannot parse (400). gunicorn writes those as an HTML page.
- New connections go to the worker holding the fewest. gunicorn's workers share one listening
  socket and whichever wakes first accepts, so a burst of kept-alive connections (8 clients, a
  proxy's pool) often lands mostly on one worker, which then serves them all on the one CPU its
  interpreter lock allows while the other idles (seen: 0.94 against 0.13 of a CPU). Each worker
  publishes its open connections in memory shared by the master and its workers; a worker
  holding more than another leaves the listener for ``RECHECK_SECONDS`` and looks again, and
  accepts anyway once a connection has waited ``MAX_YIELD_SECONDS`` (the others may be stuck).
- A thread that answered a kept-alive request waits up to ``LINGER_MS`` for the next one on the
  same connection and serves it, instead of handing the connection back to the main thread's
  poller, which hands it to a thread again: that round trip between threads was an eighth of a
  worker's CPU under a steady stream of requests.
"""

from __future__ import annotations

import json
import mmap
import select
import time

from gunicorn import util
from gunicorn.workers import gthread

CODES = {400: "invalid_request", 403: "forbidden", 414: "uri_too_long",
         417: "expectation_failed", 431: "headers_too_large", 500: "server_error",
         501: "not_implemented"}
DETAILS = {
    414: "The request line is too long: shorten the path or the query string (repeat fewer "
         "parameters, or send them in a body).",
    431: "The request headers are too many or too large.",
    500: "Internal server error.",
}

SLOTS = 64
FREE, NOT_ACCEPTING = -1, -2  # a slot no worker holds; a worker starting or stopping
RECHECK_SECONDS = 0.002
MAX_YIELD_SECONDS = 0.05
LINGER_MS = 5

# Each live worker's open connections, by slot: an anonymous shared mapping made in the master
# when it loads the worker class, so every worker it forks writes and reads the same one.
_loads = memoryview(mmap.mmap(-1, SLOTS * 4)).cast("i")
for _slot in range(SLOTS):
    _loads[_slot] = FREE


def claim_slot() -> int | None:
    """A free slot for a worker about to be forked (in the master); None when all are taken
    (that worker then accepts as gunicorn's own does)."""
    for slot in range(SLOTS):
        if _loads[slot] == FREE:
            _loads[slot] = NOT_ACCEPTING  # until its loop runs
            return slot
    return None


def release_slot(worker) -> None:
    """In the master, once ``worker`` has exited (gunicorn's ``child_exit``)."""
    slot = getattr(worker, "slot", None)
    if slot is not None:
        _loads[slot] = FREE


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's job, with a JSON body."""
    detail = DETAILS.get(status_int) or (f"{reason}: {mesg}" if mesg else reason)
    body = json.dumps({"code": CODES.get(status_int, "invalid_request"),
                       "detail": detail}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin1") + body)


class ThreadWorker(gthread.ThreadWorker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.slot = claim_slot()  # in the master, before the fork
        self._resume_at = 0.0  # listener set aside until then
        self._waiting_since = 0.0  # since when a connection has been left to the others
        self._accept_called = False

    def init_process(self) -> None:
        # gunicorn's workers write their error pages through this module function.
        util.write_error = write_json_error
        super().init_process()

    def handle(self, conn):
        # True: answered and kept alive (a new connection with nothing sent yet is deferred to
        # the poller, as gunicorn does).
        keepalive = super().handle(conn)
        while (keepalive is True and self.alive and not conn.is_http2
               and self._next_request_waiting(conn)):
            keepalive = super().handle(conn)
        return keepalive

    @staticmethod
    def _next_request_waiting(conn) -> bool:
        """Has the client sent its next request, or does it within ``LINGER_MS``?"""
        if conn.parser.unreader.buf.getvalue() or (conn.cfg.is_ssl and conn.sock.pending()):
            return True  # already read (TLS decrypts ahead of the socket)
        poll = select.poll()
        poll.register(conn.sock, select.POLLIN)
        return bool(poll.poll(LINGER_MS))

    def _publish(self) -> None:
        if self.slot is not None:
            _loads[self.slot] = self.nr_conns if self.alive else NOT_ACCEPTING

    def _holds_more(self) -> bool:
        """Does this worker hold more connections than another live, accepting one?"""
        if self.slot is None:
            return False
        mine = self.nr_conns
        return any(0 <= _loads[slot] < mine for slot in range(SLOTS) if slot != self.slot)

    def accept(self, listener) -> None:
        self._accept_called = True
        now = time.monotonic()
        if self._holds_more():
            self._waiting_since = self._waiting_since or now
            if now - self._waiting_since < MAX_YIELD_SECONDS:
                self._resume_at = now + RECHECK_SECONDS
                super().set_accept_enabled(False)
                return
        self._waiting_since = 0.0
        super().accept(listener)
        self._publish()

    def set_accept_enabled(self, enabled: bool) -> None:
        if enabled and self._resume_at:
            if time.monotonic() < self._resume_at:
                return
            self._resume_at = 0.0
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        if self._resume_at:
            timeout = min(timeout, max(0.0, self._resume_at - time.monotonic()))
        self._accept_called = False
        self._publish()
        super().wait_for_and_dispatch_events(timeout)
        if self._accepting and not self._accept_called:
            self._waiting_since = 0.0  # the listener had nothing waiting: the others took it
        self._publish()
