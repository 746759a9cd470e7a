"""The placement's requests to the API server: each counted by kind, in the cycle's figures
and since the start, and made once more when a pooled keep-alive connection turns out closed
(every write of the placement is safe to repeat); Events on what the scheduler acts on."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .client import REQUEST_TIMEOUT, Kube, describe, status_of

logger = logging.getLogger(__name__)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class CycleFigures:
    """What one cycle did and how long each phase took (``GET /api/scheduler/status``)."""

    at: float = 0.0
    duration_ms: float = 0.0
    snapshot_ms: float = 0.0
    decide_ms: float = 0.0
    apply_ms: float = 0.0
    bound: int = 0
    evicted: int = 0
    moved: int = 0
    deferred: int = 0
    undone: int = 0
    pending: int = 0
    api_calls: Counter = field(default_factory=Counter)
    eviction_reasons: list[str] = field(default_factory=list)  # one per evicted pod

    def to_dict(self) -> dict[str, Any]:
        return {"duration_ms": round(self.duration_ms, 2),
                "snapshot_ms": round(self.snapshot_ms, 2), "decide_ms": round(self.decide_ms, 2),
                "apply_ms": round(self.apply_ms, 2), "bound": self.bound,
                "evicted": self.evicted, "moved": self.moved, "deferred": self.deferred,
                "undone": self.undone, "pending": self.pending,
                "api_calls": dict(sorted(self.api_calls.items()))}


class ApiCalls:
    """The placement's client, its request counts and its Events."""

    def __init__(self, kube: Kube, *, scheduler_name: str, namespace: str):
        self.kube = kube
        self.scheduler_name = scheduler_name
        self.namespace = namespace
        self.totals: Counter = Counter()  # api calls since start, by kind
        self._lock = threading.Lock()

    @staticmethod
    def retrying(call):
        """``call()``, once more when the connection failed before any answer (a pooled
        keep-alive connection the server had closed): every write here is safe to repeat — a
        repeated bind answers 409, a repeated delete 404, a repeated patch changes nothing."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001
            if status_of(exc) is not None:
                raise
            return call()

    def count(self, figures: CycleFigures, kind: str) -> None:
        with self._lock:
            figures.api_calls[kind] += 1
            self.totals[kind] += 1

    def event(self, figures: CycleFigures, obj: dict[str, Any], *, reason: str, message: str,
              kind: str = "Pod", api_version: str = "v1", type_: str = "Normal") -> None:
        metadata = obj["metadata"]
        namespace = metadata.get("namespace") or self.namespace
        self.count(figures, "event")
        stamp = now_iso()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": api_version, "kind": kind,
                               "name": metadata["name"], "namespace": namespace,
                               "uid": metadata.get("uid")},
            "reason": reason, "message": message[:1024], "type": type_,
            "source": {"component": self.scheduler_name},
            "reportingComponent": self.scheduler_name, "reportingInstance": "osmo",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:  # again once after a dropped keep-alive connection, as every other write here
            self.retrying(lambda: self.kube.core.create_namespaced_event(
                namespace, event, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT).release_conn())
        except Exception as exc:  # noqa: BLE001 - an Event is best effort
            logger.info("osmo scheduler: event on %s not recorded: %s", metadata["name"],
                        describe(exc))
