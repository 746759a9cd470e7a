"""LIST + WATCH of one resource, resumed from its resourceVersion: what the pod listener and
the placement's informers share. A subclass LISTs (``relist``: reconcile everything, set
``resource_version``) and applies one event (``on_event``); ``step()`` does one LIST (the first
time, after a 410 Gone, or when asked) or one WATCH. Every event is applied BEFORE the
resourceVersion moves past it, so an event whose write failed comes again with the next watch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubernetes import watch

from . import metrics
from .client import REQUEST_TIMEOUT, status_of

logger = logging.getLogger(__name__)


class ListWatch:
    log_name = "k8s backend"
    resource = "pods"  # the metrics' label

    def __init__(self) -> None:
        self.resource_version: str | None = None
        self.relist_requested = False
        self._watch: Any = None
        self._stopping = False
        self._relist_reason = "initial"

    def relist(self) -> int:
        raise NotImplementedError

    def on_event(self, event_type: str, obj: dict[str, Any]) -> int:
        raise NotImplementedError

    def stream(self, lister: Callable[..., Any], *args: Any, timeout: int, **kwargs: Any) -> int:
        """Apply events from ``resource_version`` until the server ends the watch (or
        ``stop``); returns what ``on_event`` counted. Raises ApiException(410) when the version
        is too old. Events stay raw dicts (return type "object"): nothing is lost to, or fails
        in, the client's model conversion, and LIST and WATCH hand over the same shape."""
        self._watch = watch.Watch(return_type="object")
        counted = 0
        try:
            for event in self._watch.stream(
                    lister, *args, **kwargs, resource_version=self.resource_version,
                    allow_watch_bookmarks=True, timeout_seconds=timeout,
                    _request_timeout=(REQUEST_TIMEOUT[0], timeout + 15)):
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

    def watch_once(self, *, timeout: int | None = None) -> int:
        raise NotImplementedError

    def step(self) -> int:
        """One LIST (first time, after 410 or when asked) or one WATCH."""
        if self.resource_version is None or self.relist_requested:
            metrics.record_relist(self.resource, self._relist_reason)
            counted = self.relist()
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
