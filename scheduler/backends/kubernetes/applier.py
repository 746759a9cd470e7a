"""Applies one cycle's decisions through the API server, in this order:

1. evictions: a ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``, as KAI and
   kube-scheduler write it; ``EvictionByScheduler`` for stale gangs) through ``pods/status``,
   a graceful delete, and an Event on the pod. The status listener maps them as for KAI.
2. consolidation moves (:mod:`.moves`): the moved pod's replacement is created first, then the
   pod is marked (``DisruptionTarget``, reason ``ConsolidationByScheduler``), deleted and given
   a ``Moved`` Event; the replacement is bound to its target with the bindings. A replacement
   whose pod was never marked (a stop between the two writes) is deleted.
3. bindings, per gang, all pods of a gang in one cycle, through ``pods/binding``. Before the
   first write the gang is checked against the newest cache — every pod still there, unbound
   and not terminating, every node still there and schedulable, and the node's real free
   capacity (terminating pods still hold theirs: a preemptor waits until its victims are
   gone, KAI's pipelining) — and deferred whole when any check fails. A bind that fails
   anyway: ``409`` (bound meanwhile by someone else) counts as bound, and the pod is read: on
   another node than planned, it may leave that node short of room for what this cycle bound
   there — then pods this cycle bound there are released (reason ``BindingConflict``; they
   never ran) until the node has room, so no node holds more than its allocatable; ``404``
   (deleted) does not count. A gang left below its minimum is completed in the next cycles
   when it still has the pods to reach it, else undone (the pods bound in this cycle are
   released, reason ``GangIncomplete``) and explained. A released pod is evicted as above; a
   workflow task's is first replaced by an unbound copy (:mod:`.moves`), so that the task waits
   for a node again instead of failing for the scheduler's own race.

Bound pods are remembered ("assumed") until the cache shows them bound, so a cycle that runs
before the watch delivers the binding does not bind them again.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from scheduler.core.decode import Requests, node_schedulable, pod_requests
from scheduler.core.results import STALE, CycleResult

from .cache import ClusterCache
from .calls import ApiCalls, CycleFigures, now_iso
from .client import REQUEST_TIMEOUT, call, describe, status_of
from .moves import (
    CONFLICT_REASON,
    INCOMPLETE_REASON,
    MOVE_REASON,
    PREEMPTION_REASON,
    is_task_pod,
    replacement_of,
)
from .snapshot import ClusterIndex, charge, gang_ready
from .snapshot_memo import is_live, is_orphan

logger = logging.getLogger(__name__)

STALE_REASON = "EvictionByScheduler"
ASSUME_SECONDS = 30.0
EVENT_REASONS = {PREEMPTION_REASON: "Preempted", MOVE_REASON: "Moved"}
REPLACEMENT_SEEN_SECONDS = 2.0  # how long a cycle waits for the cache to show replacements


@dataclass(frozen=True)
class Replacement:
    """A consolidation move that was made: ``pod`` replaces ``moved``, to be bound to
    ``target``."""

    gang: str
    moved: str
    pod: str
    target: str
    requests: Requests


class Applier:
    """The decisions' writes; remembers the pods it bound (``assumed``: pod key → (node,
    when)) until the cache shows them bound."""

    def __init__(self, calls: ApiCalls, cache: ClusterCache, *, workers: int = 8):
        self.calls = calls
        self.kube = calls.kube
        self.cache = cache
        self.scheduler_name = calls.scheduler_name
        self.assumed: dict[str, tuple[str, float]] = {}  # pod key → (node, when)
        self.made: list[str] = []  # the replacements this cycle created (pod keys)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="osmo-bind")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def apply(self, figures: CycleFigures, result: CycleResult, index: ClusterIndex
              ) -> dict[str, str]:
        """Evictions, then moves, then bindings. Returns the gangs whose bindings were
        deferred (gang → why); the pods created on the way are in ``made``."""
        self.made = []
        self._apply_evictions(figures, result, index)
        replacements = self._apply_moves(figures, result, index)
        self.made += [replacement.pod for replacement in replacements]
        return self._apply_bindings(figures, result, index, replacements)

    def _bind(self, figures: CycleFigures, pod_key: str, node: str) -> str:
        """``ok``, ``bound`` (someone else bound it: 409), ``gone`` (404) or ``error``."""
        namespace, name = pod_key.split("/", 1)
        self.calls.count(figures, "bind")
        try:
            self.calls.retrying(lambda: call(
                self.kube, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
                {"apiVersion": "v1", "kind": "Binding",
                 "metadata": {"name": name, "namespace": namespace},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))
            return "ok"
        except Exception as exc:  # noqa: BLE001 - classified below
            status = status_of(exc)
            if status == 409:
                return "bound"
            if status == 404:
                return "gone"
            logger.warning("osmo scheduler: binding %s to %s failed: %s", pod_key, node,
                           describe(exc))
            return "error"

    def _evict(self, figures: CycleFigures, pod: dict[str, Any], *, reason: str,
               message: str) -> bool:
        """A ``DisruptionTarget`` condition, a graceful delete, an Event; True when done."""
        if not self._mark(figures, pod, reason=reason, message=message):
            return False
        if not self._delete(figures, pod):
            return False
        self.calls.event(figures, pod, reason=EVENT_REASONS.get(reason, reason),
                         message=message, type_="Warning")
        return True

    def _release(self, figures: CycleFigures, pod: dict[str, Any], *, reason: str,
                 message: str) -> bool:
        """Take back a pod this cycle bound, before it ran: evicted — a workflow task's after
        its unbound replacement is made (a 409: made already), so the task waits again. When
        that create fails, the status listener makes it from the marked pod."""
        if is_task_pod(pod):
            replacement = replacement_of(pod)
            self._create(figures, replacement)
            self.made.append(f"{pod['metadata']['namespace']}/{replacement['metadata']['name']}")
        return self._evict(figures, pod, reason=reason, message=message)

    def _mark(self, figures: CycleFigures, pod: dict[str, Any], *, reason: str,
              message: str) -> bool:
        condition = {"type": "DisruptionTarget", "status": "True", "reason": reason,
                     "message": message, "lastTransitionTime": now_iso()}
        return self._pod_write(figures, "pod_status", pod, lambda name, namespace:
                               self.kube.core.patch_namespaced_pod_status(
                                   name, namespace, {"status": {"conditions": [condition]}},
                                   _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    def _delete(self, figures: CycleFigures, pod: dict[str, Any]) -> bool:
        """A graceful delete; True when it was made (False: gone already, or failed)."""
        return self._pod_write(figures, "delete", pod, lambda name, namespace:
                               self.kube.core.delete_namespaced_pod(
                                   name, namespace, _preload_content=False,
                                   _request_timeout=REQUEST_TIMEOUT))

    def _create(self, figures: CycleFigures, pod: dict[str, Any]) -> bool:
        """False also when the name is taken (409: left from a move that was not made, and
        deleted first)."""
        return self._pod_write(figures, "create", pod, lambda _name, namespace:
                               self.kube.core.create_namespaced_pod(
                                   namespace, pod, _preload_content=False,
                                   _request_timeout=REQUEST_TIMEOUT))

    def _pod_write(self, figures: CycleFigures, kind: str, pod: dict[str, Any],
                   request) -> bool:
        """``request(name, namespace)`` about ``pod``, counted as ``kind``; True when it was
        made. A 404 (gone) or 409 (exists) is an answer, not worth a log line."""
        metadata = pod["metadata"]
        name, namespace = metadata["name"], metadata["namespace"]
        self.calls.count(figures, kind)
        try:
            self.calls.retrying(lambda: request(name, namespace)).release_conn()
        except Exception as exc:  # noqa: BLE001
            if status_of(exc) not in (404, 409):
                logger.warning("osmo scheduler: %s of %s/%s failed: %s", kind, namespace, name,
                               describe(exc))
            return False
        return True

    def assumed_nodes(self, now: float) -> dict[str, str]:
        """The pods bound but not yet seen bound (pod key → node); forgotten once the cache
        shows them bound or gone, or after ``ASSUME_SECONDS``."""
        for key, (_node, when) in list(self.assumed.items()):
            pod = self.cache.pods.get(key)
            if pod is None or (pod.get("spec") or {}).get("nodeName") or \
                    now - when > ASSUME_SECONDS:
                self.assumed.pop(key, None)
        return {key: node for key, (node, _when) in self.assumed.items()}

    def _apply_evictions(self, figures: CycleFigures, result: CycleResult,
                         index: ClusterIndex) -> None:
        for eviction in result.evictions:
            pod = index.pods.get(eviction.pod)
            if pod is None:
                continue
            if eviction.reason == STALE:
                reason = STALE_REASON
                message = (f"{self.scheduler_name}: gang {eviction.gang} stayed below its "
                           f"minimum longer than its grace period")
            else:
                reason = PREEMPTION_REASON
                message = (f"{self.scheduler_name}: {eviction.reason} by "
                           f"{eviction.by_gang or 'a waiting gang'}")
            if self._evict(figures, pod, reason=reason, message=message):
                figures.evicted += 1
                figures.eviction_reasons.append(eviction.reason)

    def _apply_moves(self, figures: CycleFigures, result: CycleResult,
                     index: ClusterIndex) -> list[Replacement]:
        """Consolidation moves: each moved pod's replacement is created first (unbound, see
        :func:`replacement_of`), then the pod gets a ``DisruptionTarget`` condition (reason
        ``ConsolidationByScheduler``) and is deleted, so its task is never without a pod.
        A move whose create fails is not made; a replacement whose pod could not be marked is
        deleted again. Returns the replacements to bind to their targets."""
        for pod in index.leaving + index.orphans:  # the rest of what an earlier cycle began
            self._delete(figures, pod)
        replacements: list[Replacement] = []
        for move in result.moves:
            pod, current = index.pods.get(move.pod), self.cache.pods.get(move.pod)
            if pod is None or current is None or not is_live(current) or \
                    current["metadata"].get("deletionTimestamp"):
                continue  # ended or going since the snapshot: nothing to move
            replacement = replacement_of(pod)
            namespace, name = pod["metadata"]["namespace"], replacement["metadata"]["name"]
            if not self._create(figures, replacement):
                continue
            message = (f"{self.scheduler_name}: moved from {move.source} to {move.target} "
                       f"(as {name}) to make room for gang {move.by_gang}")
            if not self._mark(figures, pod, reason=MOVE_REASON, message=message):
                self._delete(figures, replacement)  # the pod is gone or unchanged: no copy
                continue
            # Marked, the pod is leaving whatever happens: a failed delete is made again by
            # the next cycle (``ClusterIndex.leaving``).
            self._delete(figures, pod)
            self.calls.event(figures, pod, reason=EVENT_REASONS[MOVE_REASON], message=message)
            figures.moved += 1
            replacements.append(Replacement(move.gang, move.pod, f"{namespace}/{name}",
                                            move.target, pod_requests(pod)))
        return replacements

    def await_cache(self) -> None:
        """Wait (briefly) until the cache shows the replacements this cycle made, and the pods
        they replace marked. Until then the next cycle would not count what a replacement
        holds, or would take it for an orphan."""
        deadline = time.monotonic() + REPLACEMENT_SEEN_SECONDS
        made = self.made
        while made and time.monotonic() < deadline:
            made = [key for key in made if self.cache.pods.get(key) is None
                    or is_orphan(self.cache.pods.get(key), self.cache)]
            if made:
                time.sleep(0.02)

    def _precheck(self, placements: list[tuple[str, str]], waiting: set[str]) -> str | None:
        """Why the gang's bindings must wait, from the newest cache; None when they may go."""
        for pod_key, node in placements:
            pod = self.cache.pods.get(pod_key)
            if pod is None:
                return f"pod {pod_key} was deleted"
            if pod["metadata"].get("deletionTimestamp"):
                return f"pod {pod_key} is being deleted"
            if (pod.get("spec") or {}).get("nodeName"):
                continue  # bound meanwhile: the bind answers 409, then where it went is read
            node_obj = self.cache.nodes.get(node)
            if node_obj is None:
                return f"node {node} is gone"
            if not node_schedulable(node_obj):
                return f"node {node} is no longer schedulable"
            if node in waiting:
                return f"waiting for evicted pods on node {node} to terminate"
        return None

    @staticmethod
    def _overcommitted(index: ClusterIndex, nodes: set[str],
                       arriving: list[tuple[str, Any]]) -> set[str]:
        """Those of ``nodes`` where what is bound there — the snapshot's pods, terminating ones
        included (the core counts a victim's or a moved pod's room free at once; the node frees
        it when the pod is gone) — plus ``arriving`` (node, requests) needs more than the node
        has."""
        used = {node: list(index.terminating.get(node) or (0, 0, 0))
                for node in nodes if node in index.node_free}
        if not used:
            return set()
        for gang in index.gangs.values():
            for pod in gang.pods:
                if pod.node in used:
                    charge(used[pod.node], pod)
        for node, held in arriving:
            if node in used:
                charge(used[node], held)
        return {node for node, usage in used.items()
                if any(usage[i] > index.node_free[node][i] for i in range(3))}

    @staticmethod
    def _requests(index: ClusterIndex, replacements: list[Replacement]) -> dict[str, Any]:
        """Pod key → what it asks for, for every pod this cycle may bind."""
        held: dict[str, Any] = {pod.name: pod for gang in index.gangs.values()
                                for pod in gang.pods}
        held.update({replacement.pod: replacement.requests for replacement in replacements})
        return held

    def _waiting_on(self, result: CycleResult, index: ClusterIndex,
                    replacements: list[Replacement]) -> set[str]:
        """Nodes where this cycle's bindings need room that is not free yet: what terminating
        pods still hold, or what a move that was not made still holds."""
        leaving = {eviction.pod for eviction in result.evictions}
        leaving |= {replacement.moved for replacement in replacements}
        nodes = {node for node, values in index.terminating.items() if any(values)}
        if leaving:
            gang_pods = self._requests(index, [])
            nodes |= {gang_pods[name].node for name in leaving if name in gang_pods}
        nodes |= {move.source for move in result.moves}
        nodes |= {replacement.target for replacement in replacements}
        if not nodes:  # nothing bound here is on its way out: every binding finds its room
            return set()
        held = self._requests(index, replacements)
        arriving = [(binding.node, held[binding.pod]) for binding in result.bindings
                    if binding.pod in held]
        arriving += [(r.target, r.requests) for r in replacements]
        return self._overcommitted(index, nodes, arriving)

    def _apply_bindings(self, figures: CycleFigures, result: CycleResult,
                        index: ClusterIndex, replacements: list[Replacement]
                        ) -> dict[str, str]:
        by_gang: dict[str, list[tuple[str, str]]] = {}
        for binding in result.bindings:
            by_gang.setdefault(binding.gang, []).append((binding.pod, binding.node))
        deferred: dict[str, str] = {}
        checked: dict[str, list[tuple[str, str]]] = {}
        waiting = self._waiting_on(result, index, replacements) \
            if by_gang or replacements else set()
        for gang, placements in by_gang.items():
            why = self._precheck(placements, waiting)
            if why is not None:
                deferred[gang] = why
                figures.deferred += 1
                continue
            checked[gang] = placements
        jobs = [(gang, pod, node) for gang, placements in checked.items()
                for pod, node in placements]
        # A replacement whose target still waits for a terminating pod stays pending: a later
        # cycle places it like any pending pod of its gang.
        moved = [(None, r.pod, r.target) for r in replacements if r.target not in waiting]
        outcomes = list(self._pool.map(lambda job: self._bind(figures, job[1], job[2]),
                                       jobs + moved))
        now = time.monotonic()
        results: dict[str, dict[str, str]] = {}
        placed: dict[str, tuple[str | None, str]] = {}  # pod → (gang, node) bound by us now
        landed: dict[str, str] = {}  # pod → the node another binder bound it to, not ours
        for (gang, pod, node), outcome in zip(jobs + moved, outcomes, strict=True):
            if outcome == "bound":
                outcome, elsewhere = self._bound_where(figures, pod, node)
                if elsewhere:
                    landed[pod] = elsewhere
                    self.assumed[pod] = (elsewhere, now)
            if outcome == "ok":
                self.assumed[pod] = (node, now)
                placed[pod] = (gang, node)
                figures.bound += 1
            if gang is not None:
                results.setdefault(gang, {})[pod] = outcome
        conflicts = self._release_conflicts(figures, index, replacements, placed, landed,
                                            results) if landed else {}
        for gang, outcome in results.items():
            if all(value in ("ok", "bound") for value in outcome.values()):
                continue
            why = self._incomplete(figures, gang, outcome, index, conflicts)
            if why:
                deferred[gang] = why
        return deferred

    def _bound_where(self, figures: CycleFigures, pod_key: str, planned: str
                     ) -> tuple[str, str | None]:
        """After a 409: where the pod is bound. ``("bound", None)`` on the planned node,
        ``("bound", node)`` on another one, ``("gone", None)`` when it was deleted,
        ``("error", None)`` when it cannot be read."""
        namespace, name = pod_key.split("/", 1)
        self.calls.count(figures, "get")
        try:
            pod = self.calls.retrying(lambda: call(
                self.kube, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}"))
        except Exception as exc:  # noqa: BLE001 - classified below
            if status_of(exc) == 404:
                return "gone", None
            logger.warning("osmo scheduler: %s answered 409 and cannot be read: %s", pod_key,
                           describe(exc))
            return "error", None
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return "gone", None
        return "bound", (node if node != planned else None)

    def _release_conflicts(self, figures: CycleFigures, index: ClusterIndex,
                           replacements: list[Replacement],
                           placed: dict[str, tuple[str | None, str]], landed: dict[str, str],
                           results: dict[str, dict[str, str]]) -> dict[str, str]:
        """Pods another binder bound to other nodes than planned: where such a node now lacks
        room for what this cycle bound there, pods this cycle bound there are released
        (deleted: they never ran) until it has room — those of the intruder's gang first — so
        no node holds more than it has; their gangs are then completed or undone as any gang
        whose binds failed. Returns each released pod's explanation."""
        held = self._requests(index, replacements)
        arriving = {pod: (node, held[pod]) for pod, (_gang, node) in placed.items()
                    if pod in held}
        intruding = [(node, held[pod]) for pod, node in landed.items() if pod in held]
        gang_by_pod = {pod: gang for gang, outcome in results.items() for pod in outcome}
        conflicts: dict[str, str] = {}
        for node in sorted(set(landed.values())):
            intruders = sorted(pod for pod, n in landed.items() if n == node)
            gangs = {gang_by_pod.get(pod) for pod in intruders}
            candidates = sorted((pod for pod, (n, _held) in arriving.items() if n == node),
                                key=lambda pod: (placed[pod][0] not in gangs, pod))
            while candidates and self._overcommitted(
                    index, {node}, [*arriving.values(), *intruding]):
                pod_key = candidates.pop(0)
                del arriving[pod_key]
                why = (f"{', '.join(intruders)} was bound to {node} by another binder, which "
                       f"left no room there for {pod_key}")
                pod = self.cache.pods.get(pod_key) or index.pods.get(pod_key)
                if pod is not None:
                    self._release(figures, pod, reason=CONFLICT_REASON,
                                  message=f"{self.scheduler_name}: {why}")
                self.assumed.pop(pod_key, None)
                figures.undone += 1
                conflicts[pod_key] = why
                gang = placed[pod_key][0]
                if gang is not None:
                    results[gang][pod_key] = "released"
        return conflicts

    def _incomplete(self, figures: CycleFigures, gang_name: str, outcome: dict[str, str],
                    index: ClusterIndex, conflicts: dict[str, str]) -> str:
        """Some binds of a gang failed or were released: complete later if it can still reach
        its minimum, else undo what this cycle bound. Returns the explanation."""
        gang = index.gangs[gang_name]
        failed = sorted(pod for pod, value in outcome.items() if value not in ("ok", "bound"))
        bound = {pod.name for pod in gang.pods if pod.node} | {
            pod for pod, value in outcome.items() if value in ("ok", "bound")}
        if gang_ready(gang, bound):
            return ""
        causes = "; ".join(
            conflicts.get(pod) or (f"{pod} was deleted before binding"
                                   if outcome[pod] == "gone" else f"binding {pod} failed")
            for pod in failed)
        alive = {pod.name for pod in gang.pods if outcome.get(pod.name) not in ("gone",
                                                                               "released")}
        if gang_ready(gang, alive):
            return f"{causes}; the gang is completed in the next cycle"
        for pod_key, value in outcome.items():
            if value != "ok":
                continue
            pod = self.cache.pods.get(pod_key) or index.pods.get(pod_key)
            if pod is not None and self._release(
                    figures, pod, reason=INCOMPLETE_REASON,
                    message=f"{self.scheduler_name}: gang {gang_name} cannot reach its "
                            f"minimum: {causes}"):
                figures.undone += 1
            self.assumed.pop(pod_key, None)
        return (f"{causes}; the gang cannot reach its minimum, so the pods bound with them "
                f"were released")
