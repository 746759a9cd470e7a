"""What the placement tells of the gangs it could not place, where KAI would tell it: the
PodGroup's ``schedulingConditions`` (type ``UnschedulableOnNodePool``, the core's reasons in
words; written when they change, cleared once the gang is scheduled), an ``Unschedulable``
Event on the PodGroup and on its pending pods when the reasons change — and the pending gangs
of the cycle record (``explain``, ``GET /api/scheduler/status``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scheduler.core.kai_names import GROUP_NAME_ANNOTATION, WORKFLOW_NAME_ANNOTATION
from scheduler.core.results import CycleResult
from scheduler.cycle_figures import PendingGang, estimate_row

from .calls import ApiCalls, CycleFigures, now_iso
from .client import PODGROUPS, REQUEST_TIMEOUT, describe
from .snapshot import ClusterIndex

if TYPE_CHECKING:
    from .placement import Placement

logger = logging.getLogger(__name__)

UNSCHEDULABLE_CONDITION = "UnschedulableOnNodePool"
NODE_POOL = "default"
MAX_POD_EVENTS = 8  # Unschedulable Events per gang and change (the PodGroup always gets one)


class Reporter:
    """Writes each cycle's reasons; remembers what it wrote (``reported``, gang → reasons)."""

    def __init__(self, calls: ApiCalls):
        self.calls = calls
        self.reported: dict[str, tuple] = {}  # gang → reasons last written

    def report(self, figures: CycleFigures, result: CycleResult, index: ClusterIndex,
               deferred: dict[str, str]) -> None:
        """The cycle's reasons (the core's, an invalid queue, a deferred bind) on the
        PodGroups whose reasons changed; the condition cleared on those now placed."""
        reasons: dict[str, list[dict[str, str]]] = {}
        for explanation in result.explanations:
            reasons[explanation.gang] = [{"reason": r.code, "message": r.message}
                                         for r in explanation.reasons]
        for gang, why in {**index.skipped, **deferred}.items():
            reasons[gang] = [{"reason": "bind_deferred" if gang in deferred
                              else "invalid_queue", "message": why}]
        figures.pending = len(reasons)
        bound_now = {binding.gang for binding in result.bindings} - set(deferred)
        for gang, podgroup in index.podgroups.items():
            words = reasons.get(gang)
            if words is not None:
                signature = tuple((r["reason"], r["message"]) for r in words)
                if self.reported.get(gang) == signature:
                    continue
                self.reported[gang] = signature
                self._write_unschedulable(figures, gang, podgroup, words, index)
            elif gang in bound_now or self._has_condition(podgroup):
                if self.reported.pop(gang, None) is not None or self._has_condition(podgroup):
                    self._clear_unschedulable(figures, podgroup)
        for gang in list(self.reported):
            if gang not in index.podgroups:
                self.reported.pop(gang, None)

    @staticmethod
    def _has_condition(podgroup: dict[str, Any]) -> bool:
        return any(c.get("type") == UNSCHEDULABLE_CONDITION
                   for c in (podgroup.get("status") or {}).get("schedulingConditions") or [])

    def _podgroup_status(self, figures: CycleFigures, podgroup: dict[str, Any],
                         conditions: list[dict[str, Any]]) -> None:
        self.calls.count(figures, "podgroup_status")
        custom = self.calls.kube.custom
        try:
            self.calls.retrying(lambda: custom.patch_namespaced_custom_object_status(
                PODGROUPS[0], PODGROUPS[1], podgroup["metadata"]["namespace"], PODGROUPS[2],
                podgroup["metadata"]["name"], {"status": {"schedulingConditions": conditions}},
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT)).release_conn()
        except Exception as exc:  # noqa: BLE001 - written again when the reasons change
            logger.info("osmo scheduler: PodGroup %s status not written: %s",
                        podgroup["metadata"]["name"], describe(exc))

    def _write_unschedulable(self, figures: CycleFigures, gang: str, podgroup: dict[str, Any],
                             words: list[dict[str, str]], index: ClusterIndex) -> None:
        message = "; ".join(r["message"] for r in words)
        previous = [c for c in (podgroup.get("status") or {}).get("schedulingConditions") or []
                    if c.get("type") == UNSCHEDULABLE_CONDITION]
        try:
            transition = int(previous[-1].get("transitionID") or 0) + 1 if previous else 0
        except ValueError:
            transition = 0
        self._podgroup_status(figures, podgroup, [{
            "type": UNSCHEDULABLE_CONDITION, "nodePool": NODE_POOL, "reason": "Unschedulable",
            "message": message, "status": "True", "transitionID": str(transition),
            "lastTransitionTime": now_iso(), "reasons": words}])
        self.calls.event(figures, podgroup, reason="Unschedulable", message=message,
                         kind="PodGroup", api_version="scheduling.run.ai/v2alpha2",
                         type_="Warning")
        pending = [index.pods[key] for key in index.gang_pods.get(gang, ())
                   if key in index.pods and not (index.pods[key].get("spec") or {}).get(
                       "nodeName")]
        for pod in pending[:MAX_POD_EVENTS]:
            self.calls.event(figures, pod, reason="FailedScheduling", message=message,
                             type_="Warning")

    def _clear_unschedulable(self, figures: CycleFigures, podgroup: dict[str, Any]) -> None:
        if not self._has_condition(podgroup):
            return
        self._podgroup_status(figures, podgroup, [])


def pending_gangs(placement: Placement) -> tuple[PendingGang, ...]:
    """The last cycle's pending gangs for the cycle record (``explain``,
    ``GET /api/scheduler/status``): the PodGroup's name, its workflow and group when it is
    ours (``osmo/*`` annotations), and the reasons in words."""
    result, index = placement.last_result, placement.last_index
    if result is None or index is None:
        return ()
    rows = []
    reasons = {e.gang: (e.queue, [r.to_dict() for r in e.reasons]) for e in result.explanations}
    for gang, why in index.skipped.items():
        reasons[gang] = ("", [{"code": "invalid_queue", "message": why}])
    for gang, signature in placement.reported.items():
        if gang not in reasons and signature and signature[0][0] == "bind_deferred":
            reasons[gang] = (index.gangs[gang].queue if gang in index.gangs else "",
                             [{"code": "bind_deferred", "message": signature[0][1]}])
    for gang, (queue, words) in sorted(reasons.items()):
        podgroup = index.podgroups.get(gang)
        annotations = ((podgroup or {}).get("metadata") or {}).get("annotations") or {}
        rows.append(PendingGang(podgroup=gang.split("/", 1)[-1],
                                workflow=annotations.get(WORKFLOW_NAME_ANNOTATION, ""),
                                group=annotations.get(GROUP_NAME_ANNOTATION, ""), queue=queue,
                                reasons=words, estimate=estimate_row(result.estimate(gang))))
    return tuple(rows)

