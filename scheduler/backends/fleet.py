"""The fleet pass: which backend of its pool each waiting group goes to (the pure rule:
`scheduler.core.fleet`; docs/SCHEDULING.md "Many clusters").

One pass, oldest workflow first, over the SCHEDULING groups of every pool that names two or
more backends (and, as load, those of the single-backend pools sharing them):

- a group already bound somewhere is counted in its nodes' usage and left alone;
- a group with a destination (recorded `WorkflowGroup.backend`, or the only backend of its
  pool) has its minimum reserved there, so the next group is judged on what is left;
- a group whose recorded backend went OFFLINE (silent past `OSMO_BACKEND_LEASE`) and never
  ran is taken back and chosen again at once; one waiting where another backend would start
  it now moves there (`move_target`, at most once per `OSMO_FLEET_MOVE_INTERVAL`). Work it
  had on the old cluster is fenced (`agent.work.fence_moved`); after a move the new backend
  creates nothing until the old one's agent has deleted it there, or the old one's lease
  ends (the next pass, an agent poll's too, releases it);
- an unchosen group is chosen (`choose`) and reserved; when no backend's inventory can hold
  it, the first usable backend that has sent no nodes yet takes it (its own placement
  decides there); else it stays unchosen and waits, and `explain` says why.

Choices are recorded with a conditional update (`workflows.lifecycle.groups_choose_backend`):
of two processes choosing for one group, exactly one wins. Passes also exclude each other
with a transaction-scoped advisory lock, so a pass that finds it held does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from pools.models import Pool
from pools.selectors import served_by_q
from scheduler.core import Pod
from scheduler.core.decode import gang_of, topology_levels
from scheduler.core.fleet import (
    INF,
    BackendOption,
    choose,
    judge,
    move_target,
    reserve,
    with_live,
)
from scheduler.core.kai_names import DEFAULT_BACKEND
from scheduler.core.model import Gang, Node, Topology
from scheduler.kai.selectors import cluster_topology
from scheduler.models import Node as NodeRow
from workflows import lifecycle
from workflows.models import ALIVE_WORKFLOW_STATUSES, Task, TaskStatus, WorkflowGroup
from workflows.selectors import gpu_holding_tasks

from .agent.work import fence_moved, holding_fences, release_held
from .liveness import MAINTENANCE, OFFLINE, ONLINE, backend_status
from .selectors import backends_live, served_by_agent

FLEET_LOCK = 0x05_F1EE  # one fleet pass at a time across processes
PASS_LIMIT = 5000  # groups one pass looks at, oldest first
OFFLINE_REASON = "its backend went OFFLINE before any of its pods ran"


@dataclass
class FleetSummary:
    chosen: int = 0
    moved: int = 0
    redispatched: int = 0


def fleet_names() -> set[str]:
    """The backends named by a pool that names two or more (the only ones a choice is made
    among): one small query."""
    names: set[str] = set()
    for backends in Pool.objects.filter(parent__isnull=True, backends__len__gte=2) \
            .values_list("backends", flat=True):
        names.update(backends)
    return names


def _unusable(backend, now: datetime) -> tuple[str, str | None]:
    status = backend_status(kind=backend.kind, maintenance=backend.maintenance,
                            last_heartbeat=backend.last_heartbeat, now=now,
                            lease_seconds=settings.OSMO_BACKEND_LEASE)
    if status == ONLINE:
        return status, None
    if status == OFFLINE and backend.last_heartbeat is not None:
        age = (now - backend.last_heartbeat).total_seconds()
        return status, f"it is OFFLINE (no heartbeat for {age:.0f} s)"
    if status == OFFLINE:
        return status, "it is OFFLINE (its agent never connected)"
    return status, f"it is {status}"


def options_of(names: set[str], now: datetime) -> tuple[dict[str, BackendOption],
                                                        dict[str, str]]:
    """Each backend's option (its Node rows with what the bound work holds on them) and
    status; a name without a row is an option nothing may go to."""
    held: dict[str, list[int]] = {}
    releases: dict[str, list[tuple]] = {}
    for row in (gpu_holding_tasks().exclude(node_name="")
                .filter(node_name__in=NodeRow.objects.filter(backend__in=names).values("name"))
                .values("node_name", "gpus", "cpu_millis", "memory_bytes", "group_id",
                        "group__started_at", "workflow__exec_timeout_seconds")):
        total = held.setdefault(row["node_name"], [0, 0, 0])
        total[0] += row["gpus"]
        total[1] += row["cpu_millis"]
        total[2] += row["memory_bytes"]
        # What it holds is free again at its group's exec_timeout (none: never, as the core
        # counts it), which the soonest-start estimate reads.
        started, limit = row["group__started_at"], row["workflow__exec_timeout_seconds"]
        deadline = started.timestamp() + limit if started is not None and limit else INF
        releases.setdefault(row["node_name"], []).append(
            (deadline, row["gpus"], row["cpu_millis"], row["memory_bytes"],
             str(row["group_id"])))
    nodes: dict[str, list[Node]] = {name: [] for name in names}
    for row in NodeRow.objects.filter(backend__in=names).order_by("name").values(
            "name", "backend", "gpus", "cpu_millis", "memory_bytes", "labels", "schedulable"):
        nodes[row["backend"]].append(Node(
            name=row["name"], gpus=row["gpus"], cpu=row["cpu_millis"],
            memory=row["memory_bytes"], labels=row["labels"] or {},
            schedulable=row["schedulable"], bound=tuple(held.get(row["name"], (0, 0, 0))),
            releases=tuple(sorted(releases.get(row["name"], ())))))
    topology = Topology(levels=topology_levels(cluster_topology()))
    states = _states(names, now)
    # Live views: a pass judges many gangs on the same nodes (`scheduler.core.fleet.live`).
    options = {name: with_live(BackendOption(name, tuple(nodes[name]), topology,
                                             states[name][1])) for name in names}
    return options, {name: state[0] for name, state in states.items()}


def _statuses(names: set[str], now: datetime) -> dict[str, str]:
    """Each backend's status, as the options carry it."""
    return {name: state[0] for name, state in _states(names, now).items()}


def _states(names: set[str], now: datetime) -> dict[str, tuple[str, str | None]]:
    """Each backend's status and why nothing may go there (None: it may)."""
    rows = {backend.name: backend for backend in backends_live() if backend.name in names}
    states = {}
    for name in names:
        row = rows.get(name)
        if name == DEFAULT_BACKEND and (row is None or not served_by_agent(row)):
            # Served by this installation's own backend process, not an agent: the process
            # that dispatches is the one alive, so the fleet takes it as reachable.
            states[name] = (MAINTENANCE, "it is MAINTENANCE") \
                if row is not None and row.maintenance else (ONLINE, None)
        elif row is not None:
            states[name] = _unusable(row, now)
        else:
            states[name] = (OFFLINE, "it does not exist")
    return states


def _pool_order(row: dict) -> list[str]:
    return list((row["workflow__pool__parent__backends"] if row["workflow__pool__parent_id"]
                 else row["workflow__pool__backends"]) or [])


def _waiting(names: set[str], group_ids=None) -> tuple[list[dict], dict[int, Gang],
                                                       set[int]]:
    """The SCHEDULING groups of pools served by ``names`` (oldest first), their gangs, and
    those with a task that reached a node or started."""
    served = Q()
    for name in sorted(names):
        served |= served_by_q(name, pool_field="workflow__pool")
    groups = (WorkflowGroup.objects.filter(status=TaskStatus.SCHEDULING,
                                           workflow__status__in=ALIVE_WORKFLOW_STATUSES)
              .filter(served))
    if group_ids is not None:
        groups = groups.filter(pk__in=list(group_ids))
    rows = list(groups.order_by("workflow__submitted_at", "workflow_id", "position").values(
        "id", "podgroup", "gang", "backend", "backend_moved_at", "workflow_id",
        "workflow__pool__backends", "workflow__pool__parent_id",
        "workflow__pool__parent__backends")[:PASS_LIMIT])
    pods: dict[int, list[Pod]] = {row["id"]: [] for row in rows}
    ran: set[int] = set()
    for task in Task.objects.filter(group_id__in=list(pods)).values(
            "group_id", "name", "status", "gpus", "cpu_millis", "memory_bytes",
            "node_selector", "subgroup", "node_name", "started_at").order_by("position"):
        if task["node_name"] or task["started_at"] is not None:
            ran.add(task["group_id"])
        if task["status"] in (TaskStatus.SCHEDULING, TaskStatus.RUNNING):
            pods[task["group_id"]].append(Pod(
                name=task["name"], subgroup=task["subgroup"] or None, gpus=task["gpus"],
                cpu=task["cpu_millis"], memory=task["memory_bytes"],
                node_selector=task["node_selector"] or {}))
    gangs = {row["id"]: gang_of(row["podgroup"] or str(row["id"]), row["gang"] or {},
                                tuple(pods[row["id"]])) for row in rows if pods[row["id"]]}
    return rows, gangs, ran


def _without_inventory(options: list[BackendOption]) -> str | None:
    """When no backend's inventory can hold a gang: the first usable one that has sent no
    nodes yet (its own placement decides there), as one cluster without a node mirror did."""
    return next((o.name for o in options if o.unusable is None and not o.nodes), None)


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value else None


def fleet_pass(now: datetime | None = None, *, moves: bool = True) -> FleetSummary:
    """Choose, move and re-dispatch (see the module's docstring); nothing when no pool names
    two backends, or another process's pass is running. ``moves=False`` (the callers that
    come often: each dispatch pass, each agent poll): no moves, and no pass at all unless a
    group waits unchosen or on an OFFLINE backend — one query — since a pass reads every
    waiting group of the fleet."""
    names = fleet_names()
    if not names:
        return FleetSummary()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [FLEET_LOCK])
            if not cursor.fetchone()[0]:
                return FleetSummary()
        now = now or timezone.now()
        if not moves and not _anything_to_choose(names, now):
            return FleetSummary()
        return _pass(names, now, moves)


def _anything_to_choose(names: set[str], now: datetime) -> bool:
    """A group waits unchosen or on an OFFLINE backend, or a group moved away from a backend
    now OFFLINE waits for that backend's fence (:func:`release_held` frees it)."""
    offline = [name for name, status in _statuses(names, now).items()
               if status == OFFLINE]
    several = (Q(workflow__pool__parent__isnull=True, workflow__pool__backends__len__gte=2)
               | Q(workflow__pool__parent__backends__len__gte=2))
    return WorkflowGroup.objects.filter(
        status=TaskStatus.SCHEDULING, workflow__status__in=ALIVE_WORKFLOW_STATUSES).filter(
        several & (Q(backend__isnull=True) | Q(backend__in=offline))).exists() or (
        bool(offline) and holding_fences(offline).exists())


def _pass(names: set[str], now: datetime, moves: bool = True) -> FleetSummary:
    rows, gangs, ran = _waiting(names)
    names |= {name for row in rows for name in _pool_order(row)}
    options, statuses = options_of(names, now)
    interval = settings.OSMO_FLEET_MOVE_INTERVAL
    ever: dict = {}  # the nodes do not change within the pass: each shape is tried once
    choices: dict[int, str] = {}
    offline: dict[str, list[int]] = {}
    moving: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        gang = gangs.get(row["id"])
        if gang is None or row["id"] in ran:
            continue  # bound work is in its nodes' usage; an empty group has nothing to place
        order = [name for name in _pool_order(row) if name in options]
        current = row["backend"] or (order[0] if len(order) == 1 else None)
        if current is not None and len(order) > 1 and statuses.get(current) == OFFLINE:
            offline.setdefault(current, []).append(row["id"])
            current = None
        if current is not None:
            if current in options:
                options[current], fitted = reserve(gang, options[current])
            else:
                fitted = False
            if fitted or len(order) < 2 or not moves:
                continue
            target = move_target(gang, current, [options[n] for n in order], now.timestamp(),
                                 ran=False, last_moved=_ts(row["backend_moved_at"]),
                                 interval=interval, ever=ever)
            if target is not None:
                moving.setdefault((current, target), []).append(row["id"])
                options[target], _ = reserve(gang, options[target])
            continue
        choice = choose(gang, [options[n] for n in order], now.timestamp(), ever)
        target = choice.backend or _without_inventory([options[n] for n in order])
        if target is not None:
            choices[row["id"]] = target
            options[target], _ = reserve(gang, options[target])
    summary = FleetSummary()
    release_held([name for name, status in statuses.items() if status == OFFLINE])
    for source, ids in offline.items():
        moved = lifecycle.groups_move_backend(ids, source=source, target=None, now=now,
                                              reason=OFFLINE_REASON)
        fence_moved(source, moved)
        summary.redispatched += len(moved)
    for (source, target), ids in moving.items():
        moved = lifecycle.groups_move_backend(
            ids, source=source, target=target, now=now,
            reason=f"backend {target} starts it now, {source} does not")
        fence_moved(source, moved, hold=True)
        summary.moved += len(moved)
    summary.chosen = len(lifecycle.groups_choose_backend(choices))
    return summary


# --- explain ---------------------------------------------------------------------------------

def _words(name: str, verdict) -> str:
    message = verdict.reason.message
    if verdict.start is not None and not verdict.starts_now:
        at = datetime.fromtimestamp(verdict.start, tz=timezone.get_current_timezone())
        message += f" until {at:%H:%M}"
    return f"backend {name}: {message}"


def fleet_explain(workflow, groups) -> dict[int, dict]:
    """Per SCHEDULING group of a pool naming several backends: the backend chosen for it
    (null while none is) and, for each other backend of the pool, why it was passed over,
    judged on the backends as they are now."""
    pool = workflow.pool.parent if workflow.pool.parent_id else workflow.pool
    order = list(pool.backends or [])
    waiting = [g for g in groups if g.status == TaskStatus.SCHEDULING]
    if len(order) < 2 or not waiting:
        return {}
    now = timezone.now()
    rows, gangs, _ran = _waiting(set(order), [g.pk for g in waiting])
    options, _states_now = options_of(set(order), now)
    out = {}
    for row in rows:
        gang = gangs.get(row["id"])
        if gang is None:
            continue
        chosen = row["backend"]
        passed = []
        for name in order:
            if name == chosen:
                continue
            verdict = judge(gang, options[name], now.timestamp())
            if verdict.reason is None:
                passed.append({"backend": name, "code": "backend_ranked_lower",
                               "message": f"backend {name}: it could start here too; "
                                          f"{chosen} was chosen first"})
            else:
                passed.append({"backend": name, "code": verdict.reason.code,
                               "message": _words(name, verdict)})
        out[row["id"]] = {"backend": chosen, "passed_over": passed}
    return out
