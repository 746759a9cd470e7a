"""An informer without a framework: LIST + WATCH of one resource into a thread-safe cache.

One :class:`Informer` per resource (Nodes, Pods, PodGroups, Queues, Topologies). ``step()``
LISTs the first time (and after a 410 Gone or when asked), then WATCHes from the LIST's
``resourceVersion`` with bookmarks; every event replaces or removes the object under its key
(``namespace/name``, or ``name`` for cluster-scoped kinds). A watch that ends resumes from the
last resourceVersion seen; a 410 re-LISTs and replaces the whole cache, so objects deleted while
nobody watched disappear. ``run()`` repeats ``step()`` with exponential backoff on failures
until told to stop — the placement loop runs one thread per informer.

Readers take :meth:`Informer.items` (a list of the current objects, raw camelCase dicts, never
mutated in place: an event replaces the dict) and :attr:`Informer.version` (bumped on every
change), so a cycle reads a consistent set without holding a lock while it computes. A reader
that keeps what it built asks :meth:`Informer.changes` for the objects changed since its last
read instead (a journal of keys; a re-list starts a new one and sends it back to ``items``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .client import REQUEST_TIMEOUT, api_errors, describe, raw
from .listwatch import ListWatch

logger = logging.getLogger(__name__)
JOURNAL_SLACK = 10_000  # changes kept beyond twice the objects before a reader reads all again


def key_of(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if namespace else metadata["name"]


class Informer(ListWatch):
    """``lister(**kwargs)`` is a list call of the official client (``core.list_node``,
    ``custom.list_cluster_custom_object`` with ``args``...), used for LIST and WATCH alike."""

    def __init__(self, name: str, lister: Callable[..., Any], *args: Any,
                 label_selector: str | None = None, watch_timeout: int = 300,
                 on_change: Callable[[str, str, dict | None], None] | None = None):
        super().__init__()
        self.name = self.resource = name
        self.log_name = f"informer {name}"
        self.lister = lister
        self.args = args
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.on_change = on_change
        self.synced = threading.Event()
        self.version = 0
        self.lists = 0  # LIST calls made (metrics)
        self._objects: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        # The keys changed since the last re-list, in order; a new generation starts with an
        # empty journal (a re-list, or a journal grown past twice the objects it describes).
        self._generation = 0
        self._journal: list[str] = []

    # --- reading -----------------------------------------------------------------------------
    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get(key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def changes(self, cursor: tuple[int, int] | None
                ) -> tuple[tuple[int, int], dict[str, dict[str, Any] | None] | None]:
        """``(cursor, changed)``: each key changed since ``cursor`` (a cursor this returned)
        with its object now (None: deleted), or ``changed`` None when the reader must read
        :meth:`items` instead (its first read; a re-list, or a journal grown too long, since).
        A change between this call and that read comes again with the next call: readers
        apply changes idempotently."""
        with self._lock:
            now = (self._generation, len(self._journal))
            if cursor is None or cursor[0] != self._generation:
                return now, None
            return now, {key: self._objects.get(key) for key in self._journal[cursor[1]:]}

    # --- writing -----------------------------------------------------------------------------
    def _changed(self, event_type: str = "LIST", obj: dict[str, Any] | None = None) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change(self.name, event_type, obj)

    def _kwargs(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    def relist(self) -> int:
        # The first LIST is served from the API server's watch cache (resourceVersion "0",
        # as client-go's reflector does: several times faster than a read through etcd); a
        # later one reads through, so the cache never goes back behind what a watch showed.
        first = {"resource_version": "0"} if self.lists == 0 else {}
        body = raw(self.lister(*self.args, **self._kwargs(), **first, _preload_content=False,
                               _request_timeout=REQUEST_TIMEOUT))
        self.lists += 1
        objects = {}
        for item in body.get("items") or []:
            objects[key_of(item)] = item
        with self._lock:
            self._objects = objects
            self._generation += 1
            self._journal = []
        self.resource_version = (body.get("metadata") or {}).get("resourceVersion")
        self.relist_requested = False
        self.synced.set()
        self._changed()
        return len(objects)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        key = key_of(obj)
        with self._lock:
            if event_type == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = obj
            self._journal.append(key)
            if len(self._journal) > 2 * len(self._objects) + JOURNAL_SLACK:
                self._generation += 1
                self._journal = []
        self._changed(event_type, obj)

    def on_event(self, event_type: str, obj: dict[str, Any]) -> int:
        self.apply(event_type, obj)
        return 1

    def watch_once(self, *, timeout: int | None = None) -> int:
        return self.stream(self.lister, *self.args, **self._kwargs(),
                           timeout=self.watch_timeout if timeout is None else timeout)

    def run(self, running: Callable[[], bool], *, backoff_start: float = 0.5,
            backoff_max: float = 30.0, report: Callable[[bool, str], None] | None = None
            ) -> None:
        delay = backoff_start
        while running() and not self._stopping:
            try:
                self.step()
                delay = backoff_start
                if report is not None:
                    report(True, "")
            except Exception as exc:  # noqa: BLE001 - a dead informer would blind the scheduler
                if not running() or self._stopping:
                    break
                if isinstance(exc, api_errors()):
                    logger.warning("informer %s: %s; retrying in %.1fs", self.name,
                                   describe(exc), delay)
                else:  # not the API server's doing: start again from a fresh list
                    logger.exception("informer %s failed; re-listing in %.1fs", self.name, delay)
                    self.relist_requested = True
                if report is not None:
                    report(False, describe(exc))
                deadline = time.monotonic() + delay
                while running() and not self._stopping and time.monotonic() < deadline:
                    time.sleep(0.05)
                delay = min(backoff_max, delay * 2)

    def stop(self) -> None:
        """End a blocked watch now; ``run`` ends too."""
        self._stopping = True
        super().stop()
