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
  (* reason ``pod_deleted``) — or FAILED_PREEMPTED when it carried the condition above.
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


@dataclass(frozen=True)
class Observation:
    status: str
    node: str = ""
    exit_code: int | None = None
    reason: str | None = None
    message: str = ""  # KAI's unschedulable message (Pending, unbound)
    message_reason: str = ""


def _exit_code(pod: dict[str, Any]) -> int | None:
    codes = [((s.get("state") or {}).get("terminated") or {}).get("exitCode")
             for s in (pod.get("status") or {}).get("containerStatuses") or []]
    codes = [c for c in codes if isinstance(c, int)]
    return next((c for c in codes if c != 0), codes[0] if codes else None)


def _snake(text: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", text).lower() if text else "unschedulable"


def observe(pod: dict[str, Any], *, deleted: bool = False) -> Observation | None:
    """What ``pod`` says about its task; None when it says nothing new."""
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
