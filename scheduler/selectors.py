"""Reads of the scheduling domain: node usage, the last cycle, explanations, manifests."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import connection
from django.db.models import IntegerField, Max, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce

from osmo.errors import NotFound
from pools.node_sets import NodeCapacity
from scheduler.backends.spec import default_spec
from scheduler.core import Pod
from scheduler.core.decode import gang_of
from scheduler.core.kai_names import DEFAULT_BACKEND, PODGROUP_ANNOTATION, SUBGROUP_LABEL
from scheduler.core.readiness import InvalidGang, build_tree, is_ready, minimum_pods, ready_counts
from scheduler.kai.selectors import queues
from scheduler.kai.workflow_manifests import manifests_for, stored_spec
from workflows.models import FINAL_TASK_STATUSES, TaskStatus
from workflows.selectors import gpu_holding_tasks, visible_workflows

from .backends.fleet import fleet_explain
from .backends.health import backends_unavailable
from .backends.selectors import gpus_used_by_node  # noqa: F401 - the cluster views read it here
from .models import Node, SchedulerCycle


def schedulable_nodes() -> list[NodeCapacity]:
    """Schedulable nodes with the GPUs bound tasks hold on them: one query (`pools.ports`)."""
    held = (gpu_holding_tasks().filter(node_name=OuterRef("name")).order_by()
            .values("node_name").annotate(total=Sum("gpus")).values("total"))
    rows = (Node.objects.filter(schedulable=True).order_by("name")
            .annotate(used=Coalesce(Subquery(held, output_field=IntegerField()), 0))
            .values_list("name", "labels", "gpus", "used"))
    return [NodeCapacity(name, labels or {}, gpus, used) for name, labels, gpus, used in rows]


def largest_node_gpus(node_selector: Mapping[str, str]) -> int | None:
    """The most GPUs of one schedulable node whose labels hold the selector: one aggregate."""
    return (Node.objects.filter(schedulable=True, labels__contains=dict(node_selector))
            .aggregate(largest=Max("gpus"))["largest"])


def last_cycle(backend: str = DEFAULT_BACKEND) -> SchedulerCycle | None:
    return SchedulerCycle.objects.filter(backend=backend).first()


def pending_reasons(workflow_names: list[str]) -> dict[str, dict]:
    """The first reason the last cycles give for a pending gang of each of these workflows
    (`{group, code, message}`): what `explain` and `osmo workflow query` say first, for a page
    of a list. Filtered inside PostgreSQL, so a page never decodes every pending gang."""
    if not workflow_names:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT gang->>'workflow', gang->>'group', gang->'reasons'->0->>'code', "
            f"gang->'reasons'->0->>'message' FROM {SchedulerCycle._meta.db_table}, "
            "jsonb_array_elements(pending_gangs) AS gang "
            "WHERE gang->>'workflow' = ANY(%s) AND jsonb_array_length(gang->'reasons') > 0",
            [list(workflow_names)])
        rows = cursor.fetchall()
    found: dict[str, dict] = {}
    for workflow, group, code, message in rows:
        found.setdefault(workflow, {"group": group, "code": code, "message": message})
    return found


def visible_queue_names(*, roles) -> set[str]:
    """The queues of the pools ``roles`` may view (their pool queues and subpool queues; not
    the cluster's root queue, whose figures sum every tenant's)."""
    return {queue.queue.name for queue in queues(namespace=default_spec().namespace, roles=roles)
            if queue.pool is not None}


def scheduler_status(*, roles, user, backend: str = DEFAULT_BACKEND) -> dict:
    """``backend``'s last cycle figures; queues and pending gangs limited to what the caller
    may see (a platform admin sees everything)."""
    cycle = last_cycle(backend)
    if cycle is None:
        return {"last_cycle": None, "queues": [], "pending": []}
    pending, queues = cycle.pending_gangs, cycle.queues
    if not roles.platform_admin:
        names = visible_queue_names(roles=roles)
        queues = [queue for queue in queues if queue["name"] in names]
        names = {p["workflow"] for p in pending}
        visible = set(visible_workflows(roles=roles, user=user).filter(name__in=names)
                      .values_list("name", flat=True))
        pending = [p for p in pending if p["workflow"] in visible]
    last = {"at": cycle.at.isoformat().replace("+00:00", "Z"),
            "duration_ms": round(cycle.duration_ms, 2), "bound": cycle.bound,
            "evicted": cycle.evicted, "pending": cycle.pending}
    if cycle.metrics:  # OSMO_PLACEMENT=osmo: timings, API calls (last cycle and in total)
        last["metrics"] = cycle.metrics
    return {
        "last_cycle": last,
        "queues": queues,
        "pending": [{"podgroup": p["podgroup"], "workflow": p["workflow"],
                     "group": p["group"], "reasons": p["reasons"],
                     "estimate": p.get("estimate")} for p in pending],
    }


def explain(workflow) -> dict:
    """Per group: the last cycle's reasons, or why it is not (yet) in the scheduler, and the
    start estimate of a group that holds a reservation (`estimate`: null otherwise; see
    `scheduler.cycle_figures.estimate_row`). A group that waits while none of its pool's
    backends can take work says that first. A waiting group of a pool naming several
    backends has `backend_choice`: the one chosen and why each other was passed over
    (`backends.fleet.fleet_explain`); null otherwise."""
    cycle = last_cycle()
    by_podgroup = {p["podgroup"]: p for p in (cycle.pending_gangs if cycle else [])}
    rows = list(workflow.groups.all())
    unavailable = (backends_unavailable(workflow.pool)
                   if any(g.status == TaskStatus.SCHEDULING for g in rows) else None)
    choices = fleet_explain(workflow, rows)
    groups = []
    for group in rows:
        estimate = None
        if group.status == TaskStatus.WAITING:
            reasons = [{"code": "waiting_for_inputs",
                        "message": f"Waits for group(s) {', '.join(group.depends_on)} to "
                                   f"complete."}]
        elif group.status == TaskStatus.SCHEDULING:
            pending = by_podgroup.get(group.podgroup) or {}
            estimate = pending.get("estimate")
            reasons = pending.get("reasons") or [{
                "code": "not_yet_scheduled",
                "message": "Admitted; waiting for the next scheduling cycle."}]
            if unavailable is not None and not any(t.node_name for t in group.tasks.all()):
                reasons = [unavailable, *reasons]
        else:
            reasons = []
        groups.append({"name": group.name, "podgroup": group.podgroup, "status": group.status,
                       "backend": group.backend, "reasons": reasons, "estimate": estimate,
                       "backend_choice": choices.get(group.pk)})
    return {"workflow": workflow.name, "groups": groups}


# A group's or a task's status as a Kubernetes phase.
_PHASES = {TaskStatus.RUNNING: "Running", TaskStatus.COMPLETED: "Succeeded"}


def _phase(status: str) -> str:
    if status in _PHASES:
        return _PHASES[status]
    return "Failed" if status in FINAL_TASK_STATUSES else "Pending"


def _gang_minimum(name: str, fields: dict, tasks: list, nodes: list[str | None]
                  ) -> tuple[int, bool]:
    """The fewest pods that make the gang ready, and whether it is ready with the pods bound
    now (``nodes``, one per task) — the scheduler's own rule (``scheduler.core.readiness``):
    with ``minSubGroup`` that is whole subgroups, not a pod count."""
    gang = gang_of(name, fields, tuple(
        Pod(name=task.name, subgroup=task.subgroup or None, node=node)
        for task, node in zip(tasks, nodes, strict=True)))
    try:
        tree = build_tree(gang)
    except InvalidGang:  # no scheduler can read it: every pod is needed
        return len(tasks), all(nodes)
    return minimum_pods(tree), is_ready(tree, ready_counts(tree))


def kai_manifests(workflow) -> list[dict]:
    """A workflow's PodGroup and Pod manifests: a workload's as grouped, a workflow's built
    again from its stored spec."""
    if workflow.manifests is not None:
        return workflow.manifests
    return manifests_for(spec=stored_spec(workflow), workflow_name=workflow.name,
                         pool=workflow.pool, priority=workflow.priority)


def podgroup_detail(*, name: str, roles, user) -> dict:
    """`GET /api/podgroups/{name}`: a workflow group's or a workload's PodGroup, its gang status
    and its pods, for the callers who can see its workflow (else 404 `podgroup_not_found`)."""
    workflow = visible_workflows(roles=roles, user=user).filter(groups__podgroup=name).first()
    group = next((g for g in workflow.groups.all() if g.podgroup == name), None) \
        if workflow is not None else None
    if group is None:
        raise NotFound("podgroup_not_found", f"PodGroup '{name}' does not exist.")
    manifests = kai_manifests(workflow)
    podgroup = next((m for m in manifests if m.get("kind") == "PodGroup"
                     and (m.get("metadata") or {}).get("name") == name), None)
    pod_manifests = [m for m in manifests if m.get("kind") == "Pod" and (
        (m.get("metadata") or {}).get("annotations") or {}).get(PODGROUP_ANNOTATION) == name]
    tasks = list(group.tasks.all())
    if len(pod_manifests) != len(tasks):  # pods pair with tasks in order; else names only
        pod_manifests = [None] * len(tasks)
    pods = []
    for task, manifest in zip(tasks, pod_manifests, strict=True):
        metadata = (manifest or {}).get("metadata") or {}
        pods.append({"name": metadata.get("name") or task.name,
                     "subgroup": (metadata.get("labels") or {}).get(SUBGROUP_LABEL)
                     or task.subgroup or None,
                     "node": task.node_name or None, "phase": _phase(task.status)})
    bound = [task.node_name if task.node_name and task.status not in FINAL_TASK_STATUSES
             else None for task in tasks]
    min_member, ready = _gang_minimum(name, group.gang, tasks, bound)
    reasons = next((g["reasons"] for g in explain(workflow)["groups"] if g["podgroup"] == name),
                   [])
    return {
        "manifest": podgroup,
        "status": {"phase": _phase(group.status), "ready": ready,
                   "bound_pods": sum(1 for node in bound if node), "min_member": min_member,
                   "reasons": reasons},
        "pods": pods,
        "workflow": workflow.name,
        "group": group.name,
    }
