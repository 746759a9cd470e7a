"""LIST + WATCH of one resource, resumed from its resourceVersion: what the pod listener and
the placement's informers share. A subclass LISTs (``relist``: reconcile everything, set
``resource_version``) and applies one event (``on_event``); ``step()`` does one LIST (the first
time, after a 410 Gone, or when asked: ``request_relist``) or one WATCH. Every event is applied
BEFORE the resourceVersion moves past it, so an event whose write failed comes again with the
next watch.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import watch

from . import metrics
from .client import REQUEST_TIMEOUT, status_of

logger = logging.getLogger(__name__)

BATCH_WINDOW = 0.05  # seconds a batch of watch events waits for more after its first
BATCH_SIZE = 500


class RawWatch(watch.Watch):
    """The official client's watch, its events decoded once: the client's own decoding of an
    event with ``return_type="object"`` encodes the object again and decodes it a second time,
    three JSON passes per event where one does (a burst of bindings is thousands of events)."""

    def unmarshal_event(self, data, return_type):
        if not data or data.isspace():
            return None
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        event["raw_object"] = event.get("object")
        metadata = (event["raw_object"] or {}).get("metadata") if isinstance(
            event["raw_object"], dict) else None
        if metadata and metadata.get("resourceVersion"):
            self.resource_version = metadata["resourceVersion"]
        return event


class ListWatch:
    log_name = "k8s backend"
    resource = "pods"  # the metrics' label

    def __init__(self) -> None:
        self.resource_version: str | None = None
        self.relist_requested = False
        self.listed_at: float | None = None  # monotonic time of the last LIST
        self._watch: Any = None
        self._stopping = False
        self._relist_reason = "initial"

    def relist(self) -> int:
        raise NotImplementedError

    def request_relist(self, *, unless_listed_within: float) -> None:
        """A LIST at the next step, unless one was made in the last ``unless_listed_within``
        seconds: a periodic re-list right after the start's first LIST would list everything
        again for nothing (thousands of pods, while a burst of work begins)."""
        if self.listed_at is None or time.monotonic() - self.listed_at >= unless_listed_within:
            self.relist_requested = True

    def on_event(self, event_type: str, obj: dict[str, Any]) -> int:
        raise NotImplementedError

    def stream(self, lister: Callable[..., Any], *args: Any, timeout: int, **kwargs: Any) -> int:
        """Apply events from ``resource_version`` until the server ends the watch (or
        ``stop``); returns what ``on_event`` counted. Raises ApiException(410) when the version
        is too old. Events stay raw dicts (return type "object"): nothing is lost to, or fails
        in, the client's model conversion, and LIST and WATCH hand over the same shape."""
        self._watch = RawWatch(return_type="object")
        counted = 0
        try:
            for event in self._watch.stream(
                    lister, *args, **kwargs, resource_version=self.resource_version,
                    allow_watch_bookmarks=True, timeout_seconds=timeout,
                    _request_timeout=(REQUEST_TIMEOUT[0], timeout + 15)):
                if event is None:
                    continue  # a blank or undecodable line (a stream cut short): no event
                obj = event["raw_object"]
                if event["type"] != "BOOKMARK":
                    counted += self.on_event(event["type"], obj)
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if version:
                    self.resource_version = version
                if self._stopping:
                    break
        finally:
            self._watch = None
        return counted

    def stream_batches(self, lister: Callable[..., Any], *args: Any, timeout: int,
                       apply: Callable[[list[tuple[str, dict[str, Any]]]], int],
                       window: float = BATCH_WINDOW, size: int = BATCH_SIZE,
                       **kwargs: Any) -> int:
        """As :meth:`stream`, but the events are applied in batches — ``apply(events)`` with
        what arrived within ``window`` seconds of a batch's first event, at most ``size`` —
        in this thread, while a reader thread takes the next ones off the connection. The
        resourceVersion moves past a batch once it is applied."""
        events: queue.Queue = queue.Queue()
        done = object()

        stream = self._watch = RawWatch(return_type="object")

        def read() -> None:
            try:
                for event in stream.stream(
                        lister, *args, **kwargs, resource_version=self.resource_version,
                        allow_watch_bookmarks=True, timeout_seconds=timeout,
                        _request_timeout=(REQUEST_TIMEOUT[0], timeout + 15)):
                    if event is not None:  # None: a line that is no event (see stream)
                        events.put(event)
                    if self._stopping:
                        break
                events.put(done)
            except BaseException as exc:  # noqa: BLE001 - raised in the applying thread
                events.put(exc)

        reader = threading.Thread(target=read, name=f"{self.log_name}-watch", daemon=True)
        reader.start()
        counted, finished = 0, False
        try:
            while not finished:
                batch, deadline = [events.get()], None
                while True:
                    last = batch[-1]
                    if last is done or isinstance(last, BaseException):
                        batch.pop()
                        finished = True
                        break
                    if len(batch) >= size:
                        break
                    deadline = deadline or time.monotonic() + window
                    try:
                        batch.append(events.get(timeout=max(0.0, deadline - time.monotonic())))
                    except queue.Empty:
                        break
                applied = [(e["type"], e["raw_object"]) for e in batch
                           if e["type"] != "BOOKMARK"]
                if applied:
                    counted += apply(applied)
                for event in batch:
                    version = (event["raw_object"].get("metadata") or {}).get("resourceVersion")
                    if version:
                        self.resource_version = version
                if finished and isinstance(last, BaseException):
                    raise last
        finally:
            if not finished:  # an apply failed: end the watch; its events come again
                self.stop()
            reader.join(timeout=REQUEST_TIMEOUT[1])
            self._watch = None
        return counted

    def watch_once(self, *, timeout: int | None = None) -> int:
        raise NotImplementedError

    def step(self) -> int:
        """One LIST (first time, after 410 or when asked) or one WATCH."""
        if self.resource_version is None or self.relist_requested:
            metrics.record_relist(self.resource, self._relist_reason)
            counted = self.relist()
            self.listed_at = time.monotonic()
            self._relist_reason = "requested"
            return counted
        try:
            counted = self.watch_once()
        except Exception as exc:
            if status_of(exc) == 410:
                logger.info("%s: watch expired (410 Gone), re-listing", self.log_name)
                metrics.record_watch_restart(self.resource, "expired")
                self.resource_version = None
                self._relist_reason = "expired"
                return 0
            metrics.record_watch_restart(self.resource, "error")
            raise
        metrics.record_watch_restart(self.resource, "timeout")
        return counted

    def stop(self) -> None:
        """End a watch that is blocked reading: ``Watch.stop`` only takes effect at the next
        event, so the response's socket is shut down too (urllib3's ``shutdown``)."""
        current = self._watch
        if current is not None:
            current.stop()
            response = getattr(current, "_resp", None)
            if response is not None and hasattr(response, "shutdown"):
                try:
                    response.shutdown()
                except Exception:  # noqa: BLE001 - already closed
                    pass
