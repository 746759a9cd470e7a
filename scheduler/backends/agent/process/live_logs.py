"""A running task's log while someone reads it: the service names those pods with each work
poll (``logs``: the pod and where its stored copy ends) and the agent reads their new lines
every ``FOLLOW_SECONDS`` through ``pods/log`` (``timestamps=true``, ``sinceTime``, bounded by
``limitBytes``), sending them as ``pod_logs`` messages of at most ``LOG_MESSAGE_BYTES``. The
service keeps only lines newer than those it stored, so what a re-read or a re-sent message
brings again is kept once."""

from __future__ import annotations

import logging
import threading
from urllib.parse import quote, urlencode

from ...kubernetes.client import Kube, api_errors, call_raw, describe, status_of
from ...kubernetes.log_lines import since_time, stamp_ns
from .cluster import LOG_MESSAGE_BYTES
from .outbox import Outbox

logger = logging.getLogger("osmo.agent")

FOLLOW_SECONDS = 2.0
READ_BYTES = 4 * 1024 * 1024  # of one pod, one round: a busy log is taken over rounds
BACKLOG_MESSAGES = 1000  # while the outbox holds more (the service away), nothing is read


class LogFollower:
    def __init__(self, kube: Kube, outbox: Outbox, stop: threading.Event):
        self.kube = kube
        self.outbox = outbox
        self.stop = stop
        self.namespace = ""
        self._wanted: dict[str, tuple[list[str], int]] = {}  # pod → (task key, since_ns)
        self._sent: dict[str, int] = {}  # pod → the stamp of the last line this agent sent
        self._lock = threading.Lock()

    def following(self) -> list[str]:
        with self._lock:
            return sorted(self._wanted)

    def want(self, logs: list[dict], namespace: str) -> None:
        """The service's current set (each poll); the pods no longer in it are let go."""
        with self._lock:
            self.namespace = namespace
            self._wanted = {log["pod"]: (log["task"], int(log["since_ns"])) for log in logs}
            self._sent = {pod: ns for pod, ns in self._sent.items() if pod in self._wanted}

    def start(self) -> None:
        threading.Thread(target=self.run, name="agent-logs", daemon=True).start()

    def run(self) -> None:
        while not self.stop.wait(FOLLOW_SECONDS):
            if len(self.outbox) > BACKLOG_MESSAGES:
                continue
            with self._lock:
                wanted = dict(self._wanted)
            for pod, (task, since_ns) in wanted.items():
                if self.stop.is_set():
                    return
                self.follow(pod, task, max(since_ns, self._sent.get(pod, 0)))

    def follow(self, pod: str, task: list[str], cursor: int) -> int:
        """Send the pod's lines newer than ``cursor``; returns how many."""
        query = [("timestamps", "true"), ("limitBytes", str(READ_BYTES))]
        if cursor:
            query.append(("sinceTime", since_time(cursor)))
        path = (f"/api/v1/namespaces/{quote(self.namespace, safe='')}/pods/"
                f"{quote(pod, safe='')}/log?{urlencode(query)}")
        try:
            data = call_raw(self.kube, "GET", path, accept="*/*")
        except api_errors() as exc:
            if status_of(exc) not in (400, 404):  # 400: not started yet, 404: gone
                logger.warning("agent: following the log of %s: %s", pod, describe(exc))
            return 0
        sent, piece, size, last = 0, [], 0, cursor
        for line in data.decode("utf-8", "replace").splitlines(keepends=True):
            stamp = stamp_ns(line)
            if stamp is None or stamp[0] <= cursor or not line.endswith("\n"):
                continue  # already sent (sinceTime has whole seconds), or cut by limitBytes
            piece.append(line)
            size += len(line)
            last = stamp[0]
            sent += 1
            if size >= LOG_MESSAGE_BYTES:
                self._put(task, pod, piece)
                piece, size = [], 0
        if piece:
            self._put(task, pod, piece)
        with self._lock:
            if pod in self._wanted:
                self._sent[pod] = last
        return sent

    def _put(self, task: list[str], pod: str, lines: list[str]) -> None:
        self.outbox.put("pod_logs", {"task": task, "pod": pod, "text": "".join(lines)})
