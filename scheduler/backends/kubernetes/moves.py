"""Pods that leave while their task goes on, the pure half: which pods are leaving, and the pod
that replaces one.

- Consolidation moves. A pod moved by our scheduler (``OSMO_PLACEMENT=osmo``) carries a
  ``DisruptionTarget`` condition with reason ``ConsolidationByScheduler``. KAI's consolidation
  marks its pods ``PreemptionByScheduler`` like a preemption, but says so in the message (KAI's
  ``GetConsolidateMessage``: "... was preempted and rescheduled due to bin packing (resource
  consolidation) procedure").
- Releases. A pod our scheduler bound and takes back before it ran — another binder took the
  room (``BindingConflict``), or its gang fell below its minimum (``GangIncomplete``) — carries
  that reason. A workflow task's pod is replaced (an external pod is only deleted): the task
  waits for a node again instead of failing for the scheduler's own race.

Either way the pod's end is not its task's: the task goes on in the replacement, which carries
the annotation ``osmo/moved-from``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from scheduler.core.kai_names import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MOVED_FROM_ANNOTATION,
    TASK_NAME_ANNOTATION,
    WORKFLOW_NAME_ANNOTATION,
)

MOVE_REASON = "ConsolidationByScheduler"
PREEMPTION_REASON = "PreemptionByScheduler"
CONFLICT_REASON = "BindingConflict"  # another binder took the room a pod was bound into
INCOMPLETE_REASON = "GangIncomplete"  # the pods bound with a gang that cannot reach its minimum
RELEASE_REASONS = (CONFLICT_REASON, INCOMPLETE_REASON)
LEAVING_REASONS = (MOVE_REASON, *RELEASE_REASONS)
KAI_CONSOLIDATION_WORDS = "(resource consolidation)"
MOVE_SUFFIX = re.compile(r"-m(\d+)$")
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "managedFields", "generation", "generateName",
                  "selfLink")


def _disruptions(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "DisruptionTarget" and c.get("status", "True") == "True"]


def is_moving(pod: dict[str, Any]) -> bool:
    """Marked for a move by our scheduler: it is leaving, its replacement exists."""
    return any(c.get("reason") == MOVE_REASON for c in _disruptions(pod))


def is_released(pod: dict[str, Any]) -> bool:
    """Taken back by our scheduler before it ran."""
    return any(c.get("reason") in RELEASE_REASONS for c in _disruptions(pod))


def is_leaving(pod: dict[str, Any]) -> bool:
    """Marked moved or released by our scheduler: to be deleted, its replacement exists."""
    return any(c.get("reason") in LEAVING_REASONS for c in _disruptions(pod))


def is_task_pod(pod: dict[str, Any]) -> bool:
    """A workflow task's pod, made by the product (not another user's)."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY and \
        bool(annotations.get(WORKFLOW_NAME_ANNOTATION)) and \
        bool(annotations.get(TASK_NAME_ANNOTATION))


def moved_by_kai(pod: dict[str, Any]) -> bool:
    """Evicted by KAI's consolidation: KAI expects the pod's owner (here: us) to recreate it."""
    return any(c.get("reason") == PREEMPTION_REASON
               and KAI_CONSOLIDATION_WORDS in (c.get("message") or "")
               for c in _disruptions(pod))


def is_replacement(pod: dict[str, Any]) -> bool:
    return bool(((pod.get("metadata") or {}).get("annotations") or {}).get(
        MOVED_FROM_ANNOTATION))


def replacement_of(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod that replaces a moved ``pod``: the same spec, labels, annotations and owners,
    unbound, named ``{first name}-m{n}``. It keeps the pod's hostname, so peers that reach it
    as ``{pod}.{service}`` reach the replacement."""
    metadata = {key: copy.deepcopy(value) for key, value in pod["metadata"].items()
                if key not in _SERVER_FIELDS}
    name = metadata["name"]
    annotations = metadata.setdefault("annotations", {})
    root, moves = name, 0
    suffix_match = MOVE_SUFFIX.search(name)
    if annotations.get(MOVED_FROM_ANNOTATION) and suffix_match:
        root, moves = name[:suffix_match.start()], int(suffix_match.group(1))
    suffix = f"-m{moves + 1}"
    metadata["name"] = root[:253 - len(suffix)] + suffix
    annotations[MOVED_FROM_ANNOTATION] = name
    spec = copy.deepcopy(pod.get("spec") or {})
    spec.pop("nodeName", None)
    if not spec.get("hostname") and len(name) <= 63 and "." not in name:
        spec["hostname"] = name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
