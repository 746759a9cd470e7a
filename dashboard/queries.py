"""The dashboard's database reads, each a fixed number of queries; `dashboard.presenters` shapes
what they fetch into the templates' view models."""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from osmo.accounts.roles import Roles
from osmo.errors import NotFound
from pools.models import SUBPOOL_DELIMITER, Pool, PoolUsageSample
from pools.selectors import pool_history, pool_not_found, pool_tree
from scheduler.backends.liveness import backend_status
from scheduler.backends.selectors import backends_with_figures
from scheduler.core.kai_names import DEFAULT_BACKEND
from scheduler.models import Node
from scheduler.selectors import scheduler_status
from workflows import logreads
from workflows.models import ALIVE_WORKFLOW_STATUSES, Task, Workflow, WorkflowStatus
from workflows.selectors import gangs_by_backend, gpu_holding_tasks

from .presenters import (
    BackendRow,
    ClusterOverview,
    Hierarchy,
    HistoryRow,
    PoolPage,
    PoolWorkflows,
    RevisionView,
    UsageChart,
    backend_row,
    cluster_view,
    history_row,
    parent_views,
    revision_view,
    subpool_view,
    usage_charts,
)

WORKFLOW_ROWS = 50  # per table on a pool page; the page says how many more there are
HISTORY_ROWS = 50


# --- the pool tree ---------------------------------------------------------------------------

def pool_hierarchy(*, roles: Roles) -> Hierarchy:
    """Every visible top-level pool with its subpools: two queries whatever the size."""
    return Hierarchy(parent_views(pool_tree(roles=roles), roles))


# --- one pool --------------------------------------------------------------------------------

def pool_page(*, roles: Roles, name: str) -> PoolPage:
    """A visible pool with its family's figures (two queries), else 404 `pool_not_found`."""
    top_level_name = name.split(SUBPOOL_DELIMITER, 1)[0]
    tree = pool_tree(roles=roles, only=top_level_name)
    parent = next((p for p in tree.parents if p.name == top_level_name), None)
    if parent is None:
        raise pool_not_found(name)
    parent_view = parent_views(tree, roles)[0]
    if name == top_level_name:
        return PoolPage(pool=parent, parent=parent_view, subpool=None)
    subpool = next((s for s in tree.subpools.get(parent.name, []) if s.name == name), None)
    if subpool is None:
        raise pool_not_found(name)
    return PoolPage(pool=subpool, parent=parent_view,
                    subpool=subpool_view(subpool, tree.usage_of(subpool)))


def pool_workflows(page: PoolPage, *, limit: int = WORKFLOW_ROWS) -> PoolWorkflows:
    """Running and pending workflows of the pool (a parent's include its subpools'): three
    queries."""
    if page.subpool is not None:
        pool_filter = Q(pool_id=page.pool.pk)
    else:  # the family's ids as values: the (pool, status, …) index, whatever the history
        pool_filter = Q(pool_id__in=Pool.objects.filter(
            Q(pk=page.pool.pk) | Q(parent_id=page.pool.name)).values("pk"))
    alive = Workflow.objects.filter(pool_filter, status__in=ALIVE_WORKFLOW_STATUSES)
    counts = alive.aggregate(
        running=Count("pk", filter=Q(status=WorkflowStatus.RUNNING)),
        pending=Count("pk", filter=Q(status=WorkflowStatus.PENDING)),
    )
    rows = alive.select_related("pool", "user")
    running = list(rows.filter(status=WorkflowStatus.RUNNING)
                   .order_by("-started_at", "-submitted_at", "-id")[:limit])
    pending = list(rows.filter(status=WorkflowStatus.PENDING)
                   .order_by("submitted_at", "id")[:limit])  # queue order: oldest first
    return PoolWorkflows(running, pending, counts["running"], counts["pending"])


def pool_events(page: PoolPage, *, limit: int = HISTORY_ROWS) -> list[HistoryRow]:
    return [history_row(event) for event in pool_history(pool=page.pool)[:limit]]


def pool_revision(page: PoolPage, revision: int) -> RevisionView:
    """One revision of the page's pool (a parent's: of its family too), with the family's
    revisions either side; another pool's, or none, is 404 `revision_not_found`. Three
    queries."""
    events = pool_history(pool=page.pool)
    event = events.filter(revision=revision).first() if revision < 2**31 else None
    if event is None:
        raise NotFound("revision_not_found",
                       f"Pool '{page.name}' has no revision {revision}.")
    previous = events.filter(revision__lt=revision).order_by("-revision").values_list(
        "revision", flat=True).first()
    following = events.filter(revision__gt=revision).order_by("revision").values_list(
        "revision", flat=True).first()
    return revision_view(event, previous, following)


def gpus_held(workflow) -> int:
    """GPUs the workflow's tasks hold on the cluster now: one query."""
    return gpu_holding_tasks().filter(workflow=workflow).aggregate(
        gpus=Coalesce(Sum("gpus"), 0))["gpus"]


# --- the cluster -----------------------------------------------------------------------------

def _scheduler_status(roles: Roles | None, user) -> dict:
    """The body of `GET /api/scheduler/status` (API.md); pending gangs limited to what the
    caller may see (None: everything, for trusted callers)."""
    if roles is None:
        roles = Roles(None, True, False, (), ())
    return scheduler_status(roles=roles, user=user) or {}


def _gpus_held_by_node() -> dict[str, dict[str, int]]:
    """Node name → priority → GPUs its tasks hold: one query."""
    held: dict[str, dict[str, int]] = defaultdict(dict)
    for node_name, priority, gpus in (
        gpu_holding_tasks().exclude(node_name="").values_list("node_name", "priority")
        .annotate(gpus=Sum("gpus")).order_by()
    ):
        held[node_name][priority] = gpus
    return held


def cluster_overview(*, roles: Roles | None = None, user=None) -> ClusterOverview:
    """Nodes by zone and rack with GPUs used per priority, the queues' shares and the pending
    gangs with the scheduler's reasons: three to four queries."""
    held = _gpus_held_by_node()
    nodes = list(Node.objects.order_by("name"))
    return cluster_view(nodes, held, _scheduler_status(roles, user))


def backends_overview(*, now) -> list[BackendRow]:
    """Every backend with its status, heartbeat, nodes, GPUs, pools and gangs: the backends'
    queries (`scheduler.backends.selectors`) and one aggregate over the alive groups. A gang
    not dispatched yet waits for `default`, where all dispatch goes today."""
    gangs = gangs_by_backend()
    waiting = gangs.pop(None, {"pending": 0, "running": 0})
    rows = []
    for backend, figures in backends_with_figures():
        counts = dict(gangs.get(backend.name, {"pending": 0, "running": 0}))
        if backend.name == DEFAULT_BACKEND:
            counts = {key: counts[key] + waiting.get(key, 0) for key in counts}
        rows.append(backend_row(backend, figures, now=now, gangs=counts,
                                status=backend_status(
                                    kind=backend.kind, maintenance=backend.maintenance,
                                    last_heartbeat=backend.last_heartbeat, now=now,
                                    lease_seconds=settings.OSMO_BACKEND_LEASE)))
    return rows


def usage_history(*, roles: Roles, since, now) -> list[UsageChart]:
    """GPU use of each top-level pool the caller may view (its subpools included), sampled
    since ``since`` and ended by its use ``now`` (so the chart shows what runs between two
    samples): one aggregate query and the pool tree's two."""
    current = [{"top": parent.name, "at": now, "used": parent.all_used_gpus,
                "low": parent.all_low_gpus, "quota": parent.total_quota_gpus}
               for parent in pool_hierarchy(roles=roles).parents]
    samples = PoolUsageSample.objects.filter(at__gte=since)
    visible = roles.visible_q("name")
    if visible is not None:
        names = Pool.objects.filter(visible, parent__isnull=True).values("name")
        samples = samples.filter(Q(pool__name__in=names) | Q(pool__parent_id__in=names))
    rows = (samples.annotate(top=Coalesce("pool__parent_id", "pool__name"))
            .values("top", "at")
            .annotate(used=Sum("used_gpus"), low=Sum("low_gpus"),
                      quota=Sum("quota_gpus", filter=Q(pool__parent__isnull=True)))
            .order_by("top", "at"))
    return usage_charts(rows, sorted(current, key=lambda row: row["top"]))


# --- a workflow's logs and events ---------------------------------------------------------

TAIL_LINES = 100
TAILED_TASKS = 20  # past this many tasks, logs load when a task's log is opened
TIMELINE_EVENTS = 200


def workflow_timeline(workflow: Workflow) -> list[dict]:
    """The newest TIMELINE_EVENTS events, oldest first."""
    events = list(logreads.events_of(workflow).reverse()[:TIMELINE_EVENTS])[::-1]
    return [{"at": e.at, "source": logreads.event_source(e, workflow.name),
             "retry_id": e.retry_id, "reason": e.reason, "message": e.message}
            for e in events]


def task_logs(workflow: Workflow) -> list[dict]:
    """Each task's name and, for the first TAILED_TASKS, the last TAIL_LINES of its log."""
    tasks = list(Task.objects.filter(workflow=workflow).order_by("group__position", "position")
                 .values_list("id", "name", "status", "started_at"))
    logs = []
    for index, (pk, name, status, started_at) in enumerate(tasks):
        tail = None
        if index < TAILED_TASKS:
            tail = logreads.log_tail_text(
                logreads.LogSelection(workflow, Task(pk=pk, name=name)), TAIL_LINES,
                max_bytes=1024 * 1024)
        alive = status in ("WAITING", "SCHEDULING", "RUNNING")
        logs.append({"name": name, "tail": tail, "alive": alive, "status": status,
                     "not_started": not tail and (status in ("WAITING", "SCHEDULING") or (
                         not alive and started_at is None))})
    return logs
