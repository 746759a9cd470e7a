"""Reads of the scheduling domain: node usage, the last cycle, explanations."""

from __future__ import annotations

from django.db.models import Sum

from workflows.models import TaskStatus
from workflows.selectors import gpu_holding_tasks, visible_workflows

from .models import SchedulerCycle


def gpus_used_by_node() -> dict[str, int]:
    rows = (gpu_holding_tasks().exclude(node_name="").values_list("node_name")
            .annotate(used=Sum("gpus")).order_by())
    return dict(rows)


def last_cycle() -> SchedulerCycle | None:
    return SchedulerCycle.objects.filter(pk=1).first()


def scheduler_status(*, roles, user) -> dict:
    """Last cycle figures and queues; pending gangs limited to the workflows the caller sees."""
    cycle = last_cycle()
    if cycle is None:
        return {"last_cycle": None, "queues": [], "pending": []}
    pending = cycle.pending_gangs
    if not roles.platform_admin:
        names = {p["workflow"] for p in pending}
        visible = set(visible_workflows(roles=roles, user=user).filter(name__in=names)
                      .values_list("name", flat=True))
        pending = [p for p in pending if p["workflow"] in visible]
    return {
        "last_cycle": {"at": cycle.at.isoformat().replace("+00:00", "Z"),
                       "duration_ms": round(cycle.duration_ms, 2), "bound": cycle.bound,
                       "evicted": cycle.evicted, "pending": cycle.pending},
        "queues": cycle.queues,
        "pending": [{"podgroup": p["podgroup"], "workflow": p["workflow"],
                     "group": p["group"], "reasons": p["reasons"]} for p in pending],
    }


def explain(workflow) -> dict:
    """Per group: the last cycle's reasons, or why it is not (yet) in the scheduler."""
    cycle = last_cycle()
    by_podgroup = {p["podgroup"]: p["reasons"] for p in (cycle.pending_gangs if cycle else [])}
    groups = []
    for group in workflow.groups.all():
        if group.status == TaskStatus.WAITING:
            reasons = [{"code": "waiting_for_inputs",
                        "message": f"Waits for group(s) {', '.join(group.depends_on)} to "
                                   f"complete."}]
        elif group.status == TaskStatus.SCHEDULING:
            reasons = by_podgroup.get(group.podgroup) or [{
                "code": "not_yet_scheduled",
                "message": "Admitted; waiting for the next scheduling cycle."}]
        else:
            reasons = []
        groups.append({"name": group.name, "podgroup": group.podgroup, "status": group.status,
                       "reasons": reasons})
    return {"workflow": workflow.name, "groups": groups}
