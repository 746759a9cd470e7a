"""Long responses (followed logs) under gunicorn's threaded workers, bounded.

A followed log holds one of the worker's threads while it lasts, so: a process serves at most
``OSMO_LOG_STREAMS_PER_PROCESS`` followed streams at once (the next gets 429
``too_many_streams``, the other requests keep their threads); a user holds at most
``OSMO_LOG_STREAMS_PER_USER`` of them across every web process (leases in the database,
``osmo.accounts.stream_leases``; the next gets 429 ``too_many_user_streams``), so one user
cannot take every tenant's slots; a stream ends after its time and
byte limits (the caller's generator); and the client's socket gets a send timeout of
``OSMO_LOG_SEND_TIMEOUT`` seconds, so a client that stops reading (its TCP window full) makes
the next write fail and frees the thread instead of holding it forever.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.http import StreamingHttpResponse

from .accounts import stream_leases
from .errors import OsmoError

logger = logging.getLogger(__name__)

_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _semaphore() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(settings.OSMO_LOG_STREAMS_PER_PROCESS)
        return _slots


class _Held:
    """The chunks, holding a slot and the user's lease until the server closes the response
    (even one never iterated: a generator's own ``finally`` would not run then). The lease is
    renewed as chunks are asked for (a follower yields an empty one at each poll)."""

    def __init__(self, chunks: Iterator[bytes], slots: threading.BoundedSemaphore | None,
                 lease: int | None = None):
        self.chunks, self.slots, self.lease = chunks, slots, lease
        self.renewed = time.monotonic()

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        if self.lease is not None and \
                time.monotonic() - self.renewed >= stream_leases.RENEW_SECONDS:
            self.renewed = time.monotonic()
            stream_leases.lease_renew(self.lease)
        return next(self.chunks)

    def close(self) -> None:
        if self.slots is not None:
            self.slots, slots = None, self.slots
            slots.release()
        if self.lease is not None:
            self.lease, lease = None, self.lease
            try:
                stream_leases.lease_release(lease)
            except DatabaseError:  # it stops counting once stale
                logger.warning("stream lease %s not released: the database is unavailable",
                               lease)
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()


def client_gone(request) -> bool:
    """Has the client closed its connection? (Readable with nothing to read: its FIN.) A
    follower that waits for lines would otherwise notice only at its next write."""
    sock = request.META.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _user_lease(request, slots: threading.BoundedSemaphore) -> int | None:
    """The caller's lease on one of their ``OSMO_LOG_STREAMS_PER_USER`` streams (else 429,
    with the process's slot given back)."""
    user_id = getattr(request.user, "pk", None)
    if user_id is None:
        return None
    bound = settings.OSMO_LOG_STREAMS_PER_USER
    try:
        lease = stream_leases.lease_take(user_id=user_id, bound=bound)
    except BaseException:
        slots.release()
        raise
    if lease is None:
        slots.release()
        raise OsmoError("too_many_user_streams", f"You follow {bound} logs already, as many "
                        "as one user may at once; end one, or ask without following.",
                        status_code=429)
    return lease


def text_stream(request, chunks: Iterator[bytes], *, long: bool,
                filename: str | None = None) -> StreamingHttpResponse:
    """A chunked ``text/plain`` response of ``chunks``; ``long`` ones (followed) take a slot."""
    slots = lease = None
    if long:
        slots = _semaphore()
        if not slots.acquire(blocking=False):
            raise OsmoError("too_many_streams", "This server follows as many logs as it can "
                            "right now; try again shortly, or ask without following.",
                            status_code=429)
        lease = _user_lease(request, slots)
    sock = request.META.get("gunicorn.socket")
    if isinstance(sock, socket.socket):
        sock.settimeout(settings.OSMO_LOG_SEND_TIMEOUT)
    response = StreamingHttpResponse(_Held(chunks, slots, lease),
                                     content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # a proxy in front passes lines on at once
    if filename:
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
