"""Long responses (followed logs) under gunicorn's threaded workers, bounded.

A followed log holds one of the worker's threads while it lasts, so: a process serves at most
``OSMO_LOG_STREAMS_PER_PROCESS`` followed streams at once (the next gets 429
``too_many_streams``, the other requests keep their threads); a stream ends after its time and
byte limits (the caller's generator); and the client's socket gets a send timeout of
``OSMO_LOG_SEND_TIMEOUT`` seconds, so a client that stops reading (its TCP window full) makes
the next write fail and frees the thread instead of holding it forever.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator

from django.conf import settings
from django.http import StreamingHttpResponse

from .errors import OsmoError

_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _semaphore() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(settings.OSMO_LOG_STREAMS_PER_PROCESS)
        return _slots


class _Held:
    """The chunks, holding a slot until the server closes the response (even one never
    iterated: a generator's own ``finally`` would not run then)."""

    def __init__(self, chunks: Iterator[bytes], slots: threading.BoundedSemaphore | None):
        self.chunks, self.slots = chunks, slots

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        return next(self.chunks)

    def close(self) -> None:
        if self.slots is not None:
            self.slots, slots = None, self.slots
            slots.release()
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


def text_stream(request, chunks: Iterator[bytes], *, long: bool,
                filename: str | None = None) -> StreamingHttpResponse:
    """A chunked ``text/plain`` response of ``chunks``; ``long`` ones (followed) take a slot."""
    slots = None
    if long:
        slots = _semaphore()
        if not slots.acquire(blocking=False):
            raise OsmoError("too_many_streams", "This server follows as many logs as it can "
                            "right now; try again shortly, or ask without following.",
                            status_code=429)
    sock = request.META.get("gunicorn.socket")
    if isinstance(sock, socket.socket):
        sock.settimeout(settings.OSMO_LOG_SEND_TIMEOUT)
    response = StreamingHttpResponse(_Held(chunks, slots),
                                     content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # a proxy in front passes lines on at once
    if filename:
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
