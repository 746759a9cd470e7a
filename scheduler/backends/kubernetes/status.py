"""Status path, the pure half: a pod as the cluster reports it → a task status.

Mapping (OSMO's backend listener; decisions where the documents are silent are marked *):

- a ``DisruptionTarget`` condition (or any condition) with reason ``PreemptionByScheduler``
  → FAILED_PREEMPTED (KAI sets it before it deletes a preempted or reclaimed pod);
- a consolidation move (:mod:`.moves`: reason ``ConsolidationByScheduler``, our scheduler's, or
  KAI's consolidation message) → nothing: the task lives on in the replacement pod, whose
  binding records the move (node, reason ``consolidated``);
- a pod our scheduler released before it ran (reason ``BindingConflict`` or ``GangIncomplete``)
  → nothing either: the task waits for a node again in the replacement pod;
- phase Succeeded → COMPLETED; phase Failed → FAILED, the exit code from the first
  terminated container that failed (else the first one); * Failed with pod reason ``Evicted``
  (kubelet pressure eviction) → FAILED_EVICTED; * Failed with another pod reason and no
  container that ran (kubelet's admission refused it: ``OutOfnvidia.com/gpu``, ``NodeAffinity``,
  ``NodePorts``, ... after a bind it could not honour) → FAILED, reason ``kubelet_rejected``;
- phase Running → RUNNING on ``spec.nodeName``;
- phase Pending: bound (``spec.nodeName`` set: KAI placed it, containers are starting) →
  * stays SCHEDULING but records the node, so the task holds its GPUs from the binding on,
  as in the embedded cluster; unbound with ``PodScheduled=False`` → SCHEDULING, and KAI's
  message is kept as the group's unschedulable reason (``explain``);
- the pod was deleted: its last known state if that was final, else FAILED_EVICTED
  (* reason ``pod_deleted``) — or FAILED_PREEMPTED when it carried the condition above, or
  when KAI evicted it for a reclaim or a preemption (:func:`kai_eviction`). KAI v0.17 sets the
  condition only with ``--update-pod-eviction-condition`` (off by default); what it always
  leaves is a Normal Event ``Evict`` on the pod's PodGroup, annotated
  ``evictor-action-type`` (``reclaim``, ``preempt``, ``consolidation``, ...) and, for a reclaim
  or a preemption, the preemptor's ``evictor-pod-group-namespace``/``-name``.
- phase Unknown (node lost contact): * nothing; the node controller's later deletion decides.

The writes are the workflow lifecycle's (:func:`workflows.lifecycle.task_observed`,
``task_lost``, ``group_fail_submission``), so the rules of every other status report hold
(forward moves only, the workflow row locked, gangs settled); a report that is not a forward
move (a re-delivered event, a re-list) is simply not applied. What stays here is the pure
mapping; KAI's unschedulable reasons are kept by :mod:`.reasons`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workflows.models import TaskStatus

from .moves import PREEMPTION_REASON, is_leaving, moved_by_kai

KUBELET_REJECTED = "kubelet_rejected"


KAI_EVICT_REASON = "Evict"
KAI_ACTION_ANNOTATION = "evictor-action-type"
KAI_PREEMPTOR_NAME_ANNOTATION = "evictor-pod-group-name"
KAI_PREEMPTOR_NAMESPACE_ANNOTATION = "evictor-pod-group-namespace"
KAI_PREEMPTING_ACTIONS = ("reclaim", "preempt")


@dataclass(frozen=True)
class Eviction:
    """KAI's eviction of a PodGroup's pods for another gang (a reclaim or a preemption)."""

    action: str
    preemptor: str = ""  # "namespace/name" of the preemptor's PodGroup, when KAI names it


@dataclass(frozen=True)
class Observation:
    status: str
    node: str = ""
    exit_code: int | None = None
    reason: str | None = None
    message: str = ""  # KAI's unschedulable message (Pending, unbound)
    message_reason: str = ""
    eviction: Eviction | None = None  # KAI's reclaim or preemption that ended it


def _exit_code(pod: dict[str, Any]) -> int | None:
    codes = [((s.get("state") or {}).get("terminated") or {}).get("exitCode")
             for s in (pod.get("status") or {}).get("containerStatuses") or []]
    codes = [c for c in codes if isinstance(c, int)]
    return next((c for c in codes if c != 0), codes[0] if codes else None)


def _snake(text: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", text).lower() if text else "unschedulable"


def _event_time(event: dict[str, Any]) -> str:
    return (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
            or (event.get("metadata") or {}).get("creationTimestamp") or "")


def kai_eviction(pod: dict[str, Any], events: list[dict[str, Any]]) -> Eviction | None:
    """The latest of KAI's ``Evict`` Events on the pod's PodGroup (``events``: that
    PodGroup's) since the pod was made, when it was for a reclaim or a preemption."""
    created = (pod.get("metadata") or {}).get("creationTimestamp") or ""
    evictions = sorted((e for e in events if e.get("reason") == KAI_EVICT_REASON
                        and _event_time(e) >= created), key=_event_time)
    if not evictions:
        return None
    annotations = (evictions[-1].get("metadata") or {}).get("annotations") or {}
    action = annotations.get(KAI_ACTION_ANNOTATION, "")
    if action not in KAI_PREEMPTING_ACTIONS:
        return None
    name = annotations.get(KAI_PREEMPTOR_NAME_ANNOTATION, "")
    namespace = annotations.get(KAI_PREEMPTOR_NAMESPACE_ANNOTATION, "")
    return Eviction(action, f"{namespace}/{name}" if name else "")


def observe(pod: dict[str, Any], *, deleted: bool = False,
            eviction: Eviction | None = None) -> Observation | None:
    """What ``pod`` says about its task; None when it says nothing new. ``eviction``: KAI's
    eviction of the pod's PodGroup (:func:`kai_eviction`), read for a deleted pod."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName") or ""
    conditions = status.get("conditions") or []
    if is_leaving(pod) or moved_by_kai(pod):
        return None  # the task goes on in the replacement (``moves``)
    if any(c.get("reason") == PREEMPTION_REASON and c.get("status", "True") == "True"
           for c in conditions):
        return Observation(TaskStatus.FAILED_PREEMPTED, node, reason="preempted")
    phase = status.get("phase") or "Pending"
    if phase == "Succeeded":
        return Observation(TaskStatus.COMPLETED, node, exit_code=_exit_code(pod) or 0)
    if phase == "Failed":
        if status.get("reason") == "Evicted":
            return Observation(TaskStatus.FAILED_EVICTED, node, exit_code=_exit_code(pod),
                               reason="evicted")
        if status.get("reason") and _exit_code(pod) is None:
            # kubelet's admission refused the pod (OutOfcpu, NodeAffinity, NodePorts, ...):
            # no container ran, so no exit code tells the user why
            return Observation(TaskStatus.FAILED, node, reason=KUBELET_REJECTED)
        return Observation(TaskStatus.FAILED, node, exit_code=_exit_code(pod))
    if deleted and eviction is not None:
        return Observation(TaskStatus.FAILED_PREEMPTED, node, reason="preempted",
                           eviction=eviction)
    if deleted:
        return Observation(TaskStatus.FAILED_EVICTED, node, reason="pod_deleted")
    if phase == "Running":
        return Observation(TaskStatus.RUNNING, node)
    if phase == "Pending":
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if not node and scheduled is not None and scheduled.get("status") == "False":
            return Observation(TaskStatus.SCHEDULING, message=scheduled.get("message") or "",
                               message_reason=scheduled.get("reason") or "Unschedulable")
        return Observation(TaskStatus.SCHEDULING, node)
    return None


def reasons_of(observation: Observation) -> list[dict[str, str]]:
    """The ``explain`` reasons of an unschedulable pod (``{code, message}``)."""
    if not observation.message:
        return []
    return [{"code": _snake(observation.message_reason), "message": observation.message}]
