"""The workflow state machine: every write of a workflow's, group's or task's status.

The API (status reports, cancel), the embedded scheduling loop (bind, evict, mark running,
simulated completion), the Kubernetes backend (observed pod states, lost pods, refused
submissions) and the pool services (cancel on subpool delete) all change statuses through the
services here, and nothing outside the workflows app writes a workflows table.

Every change of a workflow's tasks happens with the workflow row locked (in id order when there
are several), so concurrent reports, cancels and scheduler decisions on one workflow apply one
after the other.

A statement that updates tasks by a list of ids and values and checks their status (``FROM
unnest(ids, ...) v WHERE t.id = v.id AND t.status ...``) also says ``t.id = ANY(ids)``: without
statistics (a table that grew since its last ANALYZE, as in a fresh deployment's first burst)
the planner took the status check to leave one task and had every task scanned once per id of
a small batch (13.8 ms for 20 tasks among 5,000); it now reads them by key (0.3 ms), or scans a
small table once.

Rules (OSMO's, where the contract is silent):
- A task moves forward only: WAITING → SCHEDULING → RUNNING → a final status (a final status may
  follow any alive one).
- A group is a gang: when one of its tasks fails, its other alive tasks are canceled
  (`FAILED_CANCELED`, reason `group_failed`); when every replica of its lead task has completed,
  the others are stopped as `COMPLETED` (reason `lead_completed`).
- A group's final status takes the worst of its tasks': FAILED_EXEC_TIMEOUT, FAILED_QUEUE_TIMEOUT,
  FAILED_PREEMPTED, FAILED_EVICTED, FAILED_BACKEND_ERROR, FAILED, FAILED_CANCELED, then
  COMPLETED. The workflow's takes
  the worst of its groups' (so a workflow that timed out says so, as OSMO's does).
- When a group fails, the workflow's other alive groups are canceled (reason `upstream_failed`)
  - except when it timed out: then, as in OSMO 6.3, only the groups that wait for its output
  are canceled and its siblings go on; when a group completes, waiting groups whose inputs
  have all completed are released to the scheduler (SCHEDULING).
- Timeouts (OSMO's, per group): a group RUNNING longer than its workflow's exec_timeout
  (counted from the group's RUNNING transition) ends FAILED_EXEC_TIMEOUT; a group still in
  SCHEDULING with no task on a node after its queue_timeout (counted from its SCHEDULING
  transition) ends FAILED_QUEUE_TIMEOUT (`groups_time_out`). On Kubernetes the cleaner then
  deletes their pods like any ended group's.
- Exit actions (`workflows/exits.py`): a COMPLETED or FAILED report's exit code completes,
  fails, or reschedules the task's group (every task SCHEDULING again, the next retry_id), by
  the spec's exitActions, else the pool's default_exit_actions, up to the pool's max_retries.
- Scheduler decisions: a bound task is RUNNING on its node; an evicted gang fails as a whole
  (FAILED_PREEMPTED or the eviction's reason), while evicted elastic surplus (the gang keeps
  other bound pods) returns to pending (SCHEDULING, unbound, reason `preempted_requeued`) to
  run again later, as KAI re-queues them; a task moved by consolidation keeps running on its
  new node (reason `consolidated`); a task whose pod the scheduler released before it ran
  waits for a node again (SCHEDULING, unbound).
- A lost cluster: the groups that started on a backend silent past its lost timeout end
  FAILED_BACKEND_ERROR as a gang (`groups_end_backend_lost`), as they do when the backend is
  deleted with `force`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from osmo import events
from osmo.errors import Conflict, NotFound
from pools.drain import drain_check_if_deleting_on_commit

from . import exits, logstore, notifications
from .logstore import Event
from .models import (
    ALIVE_TASK_STATUSES,
    ALIVE_WORKFLOW_STATUSES,
    FINAL_TASK_STATUSES,
    Task,
    TaskStatus,
    Workflow,
    WorkflowGroup,
    WorkflowStatus,
)
from .selectors import alive_workflows, gpu_holding_tasks
from .settle import final_event, settle_workflows, words

# Reason of an evicted elastic surplus task that is pending again (not failed).
REQUEUED = "preempted_requeued"
# Reason of a running task the scheduler moved to another node (consolidation).
CONSOLIDATED = "consolidated"

# Reasons of tasks ended by a timeout.
EXEC_TIMEOUT = "exec_timeout"
QUEUE_TIMEOUT = "queue_timeout"

STATUS_RANK = {TaskStatus.WAITING: 0, TaskStatus.SCHEDULING: 1, TaskStatus.RUNNING: 2}


def status_rank(status: str) -> int:
    """Forward order of task statuses: alive ones in order, then every final one."""
    return STATUS_RANK.get(status, 3)


def _lock_workflow(workflow: Workflow) -> Workflow:
    return Workflow.objects.select_for_update().select_related("pool").get(pk=workflow.pk)


def lock_workflows(ids: Iterable[int]) -> None:
    """Lock several workflows' rows in id order (the order every other writer uses)."""
    ids = sorted(set(ids))
    if ids:
        list(Workflow.objects.filter(pk__in=ids).order_by("pk")
             .select_for_update().values_list("pk", flat=True))


def _end_tasks(tasks, status: str, reason: str | None, now,
               exit_code: int | None = None) -> None:
    ending = list(tasks.filter(status__in=ALIVE_TASK_STATUSES).values_list("id", "workflow_id"))
    if not ending:
        return
    Task.objects.filter(pk__in=[pk for pk, _ in ending], status__in=ALIVE_TASK_STATUSES
                        ).update(status=status, reason=reason, finished_at=now,
                                 **({"exit_code": exit_code} if exit_code is not None else {}))
    logstore.events_record([final_event(pk, workflow_id, status, reason=reason, at=now)
                            for pk, workflow_id in ending])


def _after_finish(workflow: Workflow) -> None:
    """A workflow ended: its subpool may be DELETING and now drained."""
    if workflow.pool.is_subpool:
        drain_check_if_deleting_on_commit(workflow.pool_id)


def settle(workflow: Workflow, now) -> None:
    """Derive the workflow's group and workflow statuses from its tasks (row locked)."""
    settle_workflows([workflow.pk], now)


@transaction.atomic
def task_report_status(*, workflow: Workflow, task_name: str, status: str,
                       exit_code: int | None = None, node: str | None = None,
                       reason: str | None = None) -> Task:
    """A backend's report of one task's status; only forward moves are accepted."""
    workflow = _lock_workflow(workflow)
    task = Task.objects.filter(workflow=workflow, name=task_name).first()
    if task is None:
        raise NotFound("task_not_found",
                       f"Workflow '{workflow.name}' has no task '{task_name}'.")
    if status not in TaskStatus.values:
        raise Conflict("invalid_transition", f"'{status}' is not a task status.")
    if task.status in FINAL_TASK_STATUSES or status_rank(status) <= status_rank(task.status):
        raise Conflict("invalid_transition",
                       f"Task '{task_name}' is {task.status}; it cannot move to {status}.")
    now = timezone.now()
    decided = exits.decide(workflow=workflow, task=task, status=status, exit_code=exit_code,
                           reason=reason, now=now)
    if decided is None:  # its group runs again
        task.refresh_from_db()
        return task
    status, reason = decided
    task.status = status
    if status == TaskStatus.RUNNING:
        task.started_at = task.started_at or now
        task.node_name = node or task.node_name
    if status in FINAL_TASK_STATUSES:
        task.finished_at = now
        task.exit_code = exit_code
        task.reason = reason or ("preempted" if status == TaskStatus.FAILED_PREEMPTED else
                                 "evicted" if status == TaskStatus.FAILED_EVICTED else None)
    task.save()
    if status == TaskStatus.RUNNING:
        logstore.events_record([Event(workflow.pk, task.pk, "Running",
                                      f"on node {task.node_name}" if task.node_name else "",
                                      now)])
    elif status in FINAL_TASK_STATUSES:
        logstore.events_record([final_event(task.pk, workflow.pk, status, exit_code=exit_code,
                                            reason=task.reason, at=now)])
    settle(workflow, now)
    return task


def _cancel(workflows: list[Workflow], reason: str, by: str = "") -> None:
    now = timezone.now()
    ids = [w.pk for w in workflows]
    logstore.events_record([Event(pk, None, "Canceled", f"by {by}" if by else words(reason),
                                  now) for pk in ids])
    _end_tasks(Task.objects.filter(workflow_id__in=ids), TaskStatus.FAILED_CANCELED, reason,
               now)
    WorkflowGroup.objects.filter(workflow_id__in=ids, status__in=ALIVE_TASK_STATUSES).update(
        status=TaskStatus.FAILED_CANCELED, reason=reason, finished_at=now)
    Workflow.objects.filter(pk__in=ids).update(status=WorkflowStatus.FAILED_CANCELED,
                                               reason=reason, finished_at=now)
    events.publish(events.WorkflowsCanceled(workflows=tuple(w.name for w in workflows)))
    notifications.enqueue_on_commit(ids)


@transaction.atomic
def workflow_cancel(*, workflow: Workflow, reason: str = "canceled_by_user",
                    by: str = "") -> Workflow:
    """Cancel an alive workflow: its alive tasks end FAILED_CANCELED and release their GPUs.
    ``by``: who canceled it (the events tell)."""
    workflow = _lock_workflow(workflow)
    if workflow.status not in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING):
        raise Conflict("invalid_transition",
                       f"Workflow '{workflow.name}' already ended ({workflow.status}).")
    _cancel([workflow], reason, by)
    workflow.refresh_from_db()
    _after_finish(workflow)
    return workflow


@transaction.atomic
def workflow_tag(*, workflow: Workflow, add: Sequence[str] = (),
                 remove: Sequence[str] = ()) -> list[str]:
    """Remove, then add tags (OSMO's order); returns the tags, sorted."""
    workflow = _lock_workflow(workflow)
    tags = sorted((set(workflow.tags or []) - set(remove)) | set(add))
    Workflow.objects.filter(pk=workflow.pk).update(tags=tags)
    return tags


@transaction.atomic
def workflows_cancel_not_started(*, pool, reason: str) -> list[str]:
    """Cancel the pool's alive workflows that hold no GPUs yet (FAILED_CANCELED, `reason`).

    Rows are locked in id order so concurrent cancels and status reports cannot interleave.
    Returns the canceled workflow names.
    """
    holding = gpu_holding_tasks().filter(workflow=OuterRef("pk"))
    workflows = list(
        alive_workflows(pool_ids=[pool.pk]).filter(~Exists(holding))
        .select_for_update().order_by("pk")
    )
    if workflows:
        _cancel(workflows, reason)
    return [w.name for w in workflows]


# --- scheduler decisions (the embedded loop) ---------------------------------------------------

@dataclass(frozen=True)
class TaskEviction:
    """One bound task the scheduler takes off its node, and the reason users see."""

    task_id: int
    node: str
    group_id: int
    workflow_id: int
    reason: str
    by: str = ""  # the PodGroup that won the GPUs ("" for a stale gang)
    words: str = ""  # for the events: "preempted by workflow Y", "reclaimed by queue Z"


def tasks_bind(bindings: Sequence[tuple[int, str]], now: datetime) -> int:
    """Bind pending, unbound tasks to nodes (they run from now on); returns how many bound
    (a task that changed meanwhile is left alone). The callers hold the workflows' locks.
    One statement for any number of bindings: a cycle binds thousands at once."""
    if not bindings:
        return 0
    with connection.cursor() as cursor:
        # The events (bound, running) are written by the same statement.
        cursor.execute(
            "WITH bound AS (UPDATE workflows_task t SET node_name = v.node, status = %s, "
            "started_at = %s FROM unnest(%s::bigint[], %s::text[]) AS v(id, node) "
            "WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id AND t.node_name = '' "
            "AND t.status = %s "
            "RETURNING t.id, t.workflow_id, t.node_name, t.retry_id), "
            "events AS (INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, "
            "message, retry_id) SELECT workflow_id, id, %s, e.reason, e.prefix || node_name, "
            "retry_id FROM bound, "
            "(VALUES (1, 'Bound', 'bound to node '), (2, 'Running', 'on node ')) "
            "AS e(n, reason, prefix) ORDER BY id, e.n) "
            "SELECT count(*) FROM bound",
            [TaskStatus.RUNNING, now, [b[0] for b in bindings], [b[1] for b in bindings],
             [b[0] for b in bindings], TaskStatus.SCHEDULING, now])
        return cursor.fetchone()[0]


def tasks_mark_running(task_ids: Sequence[int], now: datetime,
                       backends: Sequence[str] | None = None) -> None:
    """The groups (and workflows) of newly bound tasks are running: one statement (their ids
    as arrays, so they are read by key: see the module's note on id-list updates).
    ``backends``: per task, the backend of the node it was bound to, which its group records
    as where it was dispatched (None: the group keeps the one it has)."""
    if not task_ids:
        return
    names = list(backends) if backends is not None else [None] * len(task_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH started AS (SELECT DISTINCT ON (t.group_id) t.group_id, t.workflow_id, "
            "  v.backend FROM workflows_task t "
            "  JOIN unnest(%s::bigint[], %s::text[]) AS v(id, backend) ON t.id = v.id "
            "  WHERE t.id = ANY(%s::bigint[]) ORDER BY t.group_id, v.backend), "
            "grp AS (UPDATE workflows_workflowgroup g SET status = %s, started_at = %s, "
            "  below_min_since = NULL, backend = COALESCE(s.backend, g.backend) FROM started s "
            "  WHERE g.id = ANY(ARRAY(SELECT group_id FROM started)) AND g.id = s.group_id "
            "  AND g.status = %s) "
            "UPDATE workflows_workflow SET status = %s, started_at = %s "
            "WHERE id = ANY(ARRAY(SELECT workflow_id FROM started)) AND status = %s",
            [list(task_ids), names, list(task_ids), TaskStatus.RUNNING, now,
             TaskStatus.SCHEDULING, WorkflowStatus.RUNNING, now, WorkflowStatus.PENDING])


def groups_dispatched(group_ids: Sequence[int], backend: str) -> None:
    """The groups' objects were created on ``backend``'s cluster: it is where they were
    dispatched (one statement for a batch)."""
    if not group_ids:
        return
    WorkflowGroup.objects.filter(pk__in=list(group_ids)).exclude(
        backend=backend).update(backend=backend)


def tasks_evict(evictions: Sequence[TaskEviction], now: datetime) -> int:
    """Take tasks off their nodes: when every bound task of a gang goes, the gang fails
    (the tasks end FAILED_PREEMPTED); elastic surplus returns to pending (reason
    `preempted_requeued`). Returns how many
    were evicted (a task that moved meanwhile is left alone); the workflows settle."""
    if not evictions:
        return 0
    bound: dict[int, set[int]] = {}
    for group_id, task_id in (Task.objects.filter(
            group_id__in={e.group_id for e in evictions},
            status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING))
            .exclude(node_name="").values_list("group_id", "id")):
        bound.setdefault(group_id, set()).add(task_id)
    victims: dict[int, set[int]] = {}
    for eviction in evictions:
        victims.setdefault(eviction.group_id, set()).add(eviction.task_id)
    whole = [victims[e.group_id] >= bound.get(e.group_id, set()) for e in evictions]
    events = [Event(e.workflow_id, e.task_id,
                    "Preempted" if e.reason != "stale_gang" else "Evicted",
                    f"{e.words or words(e.reason)}; off node {e.node}"
                    + ("" if gang else ", pending again"), now)
              for e, gang in zip(evictions, whole, strict=True)]
    with connection.cursor() as cursor:
        # One statement: a task still running on that node is taken off it (its gang's last
        # bound task: FAILED_PREEMPTED; surplus: pending again), with its event.
        cursor.execute(
            "WITH v AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::boolean[], "
            "  %s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY "
            "  AS v(id, node, gang, reason, by, word, message, n)), "
            "evicted AS (UPDATE workflows_task t SET preempted_by = v.by, "
            "  status = CASE WHEN v.gang THEN %s ELSE %s END, "
            "  reason = CASE WHEN v.gang THEN v.reason ELSE %s END, "
            "  finished_at = CASE WHEN v.gang THEN %s ELSE t.finished_at END, "
            "  node_name = CASE WHEN v.gang THEN t.node_name ELSE '' END, "
            "  started_at = CASE WHEN v.gang THEN t.started_at END "
            "  FROM v WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id "
            "  AND t.node_name = v.node AND t.status = %s "
            "  RETURNING t.id, t.workflow_id, t.retry_id), "
            "events AS (INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, "
            "  message, retry_id) SELECT evicted.workflow_id, evicted.id, %s, v.word, "
            "  v.message, evicted.retry_id FROM evicted JOIN v ON v.id = evicted.id ORDER BY v.n) "
            "SELECT count(*) FROM evicted",
            [[e.task_id for e in evictions], [e.node for e in evictions], whole,
             [e.reason for e in evictions], [e.by for e in evictions],
             [e.reason for e in events], [e.message[:1000] for e in events],
             TaskStatus.FAILED_PREEMPTED, TaskStatus.SCHEDULING, REQUEUED, now,
             [e.task_id for e in evictions], TaskStatus.RUNNING, now])
        evicted = cursor.fetchone()[0]
    settle_workflows({e.workflow_id for e in evictions}, now)
    return evicted


@dataclass(frozen=True)
class TaskMove:
    """Consolidation: a running task the scheduler moves from one node to another."""

    task_id: int
    source: str
    target: str


def tasks_move(moves: Sequence[TaskMove]) -> int:
    """Re-bind running tasks to their new nodes: they keep running (not failed, not pending)
    and their reason `consolidated` records the move. A task that is no longer running on the
    source node is left alone. Returns how many moved; the callers hold the workflows' locks."""
    if not moves:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH moved AS (UPDATE workflows_task t SET node_name = v.target, reason = %s "
            "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, source, target) "
            "WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id AND t.node_name = v.source "
            "AND t.status = %s "
            "RETURNING t.id, t.workflow_id, t.retry_id, v.source, v.target), "
            "events AS (INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, "
            "message, retry_id) SELECT workflow_id, id, now(), 'Moved', "
            "'moved by consolidation from ' || source || ' to ' || target, retry_id "
            "FROM moved) "
            "SELECT count(*) FROM moved",
            [CONSOLIDATED, [m.task_id for m in moves], [m.source for m in moves],
             [m.target for m in moves], [m.task_id for m in moves], TaskStatus.RUNNING])
        return cursor.fetchone()[0]


def groups_record_below_min(since: Mapping[int, datetime | None]) -> None:
    """Remember since when running gangs are below their minimum (None: no longer)."""
    if not since:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE workflows_workflowgroup g SET below_min_since = v.since "
            "FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(id, since) WHERE g.id = v.id",
            [list(since), list(since.values())])


# --- the embedded cluster ------------------------------------------------------------------

def tasks_complete_due(*, now: datetime, default_seconds: int, nodes: list[str]) -> int:
    """Embedded cluster: its running tasks (on ``nodes``) end COMPLETED (exit code 0) after
    their `sleep N` seconds, else after ``default_seconds``; returns how many ended. A task
    on another backend's node runs on a real cluster: only its reports end it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, workflow_id, sim_exit_code FROM workflows_task WHERE status = %s "
            "AND started_at + make_interval(secs => coalesce(run_seconds, %s)) <= %s "
            "AND node_name = ANY(%s::text[])",
            [TaskStatus.RUNNING, default_seconds, now, nodes])
        rows = cursor.fetchall()
    # A command that ends `exit M` (rare) ends as a backend's report would: its exit actions
    # decide; the others end COMPLETED together.
    failing = [(pk, code) for pk, _, code in rows if code]
    due = [(pk, workflow_id) for pk, workflow_id, code in rows if not code]
    ended = sum(_sim_exit(pk, code) for pk, code in failing)
    if not due:
        return ended
    workflow_ids = {workflow_id for _, workflow_id in due}
    lock_workflows(workflow_ids)
    with connection.cursor() as cursor:
        # Checked again under the locks (a task that ended meanwhile is left alone); the
        # events are written by the same statement.
        cursor.execute(
            "WITH ended AS (UPDATE workflows_task SET status = %s, exit_code = 0, "
            "  finished_at = %s WHERE id = ANY(%s::bigint[]) AND status = %s "
            "  RETURNING id, workflow_id, retry_id), "
            "events AS (INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, "
            "  message, retry_id) SELECT workflow_id, id, %s, 'Completed', 'exit code 0', "
            "  retry_id FROM ended "
            "  ORDER BY id) "
            "SELECT count(*) FROM ended",
            [TaskStatus.COMPLETED, now, [pk for pk, _ in due], TaskStatus.RUNNING, now])
        changed = cursor.fetchone()[0]
    settle_workflows(workflow_ids, now)
    return changed + ended


def _sim_exit(task_id: int, exit_code: int) -> int:
    """Embedded cluster: a due task whose command ends `exit M` ends FAILED with M (its exit
    actions may complete it or run its group again)."""
    task = Task.objects.select_related("workflow").filter(pk=task_id).first()
    if task is None:
        return 0
    try:
        task_report_status(workflow=task.workflow, task_name=task.name,
                           status=TaskStatus.FAILED, exit_code=exit_code)
    except Conflict:  # it moved on meanwhile
        return 0
    return 1


def groups_time_out(*, now: datetime) -> int:
    """End the groups past their exec_timeout (RUNNING since `started_at`) or queue_timeout
    (SCHEDULING since `scheduling_at`, no task on a node yet): their alive tasks end
    FAILED_EXEC_TIMEOUT / FAILED_QUEUE_TIMEOUT, the workflows settle (siblings go on).
    Returns how many groups ended. The workflows are locked, then each group is checked
    again, so a group that moved on meanwhile is left alone."""
    with connection.cursor() as cursor:
        cursor.execute(
            # From the alive workflows (an alive group's workflow is alive): a few hundred
            # rows through an index, not every group that ever ran.
            "SELECT g.id, g.workflow_id, %s FROM workflows_workflowgroup g "
            "JOIN workflows_workflow w ON w.id = g.workflow_id "
            "WHERE w.status IN (%s, %s) AND g.status = %s "
            "AND w.exec_timeout_seconds IS NOT NULL "
            "AND g.started_at + make_interval(secs => w.exec_timeout_seconds) <= %s "
            "UNION ALL "
            "SELECT g.id, g.workflow_id, %s FROM workflows_workflowgroup g "
            "JOIN workflows_workflow w ON w.id = g.workflow_id "
            "WHERE w.status IN (%s, %s) AND g.status = %s "
            "AND w.queue_timeout_seconds IS NOT NULL "
            "AND g.scheduling_at + make_interval(secs => w.queue_timeout_seconds) <= %s "
            "AND NOT EXISTS (SELECT 1 FROM workflows_task t WHERE t.group_id = g.id "
            "                AND t.node_name <> '' AND t.status IN (%s, %s))",
            [TaskStatus.FAILED_EXEC_TIMEOUT, *ALIVE_WORKFLOW_STATUSES, TaskStatus.RUNNING, now,
             TaskStatus.FAILED_QUEUE_TIMEOUT, *ALIVE_WORKFLOW_STATUSES, TaskStatus.SCHEDULING,
             now,
             TaskStatus.SCHEDULING, TaskStatus.RUNNING])
        due = cursor.fetchall()
    if not due:
        return 0
    lock_workflows({workflow_id for _, workflow_id, _ in due})
    ended = 0
    for status, expected, reason in (
            (TaskStatus.FAILED_EXEC_TIMEOUT, TaskStatus.RUNNING, EXEC_TIMEOUT),
            (TaskStatus.FAILED_QUEUE_TIMEOUT, TaskStatus.SCHEDULING, QUEUE_TIMEOUT)):
        groups = list(WorkflowGroup.objects.filter(
            pk__in=[group_id for group_id, _, due_status in due if due_status == status],
            status=expected).values_list("pk", flat=True))
        if groups:
            _end_tasks(Task.objects.filter(group_id__in=groups), status, reason, now)
            ended += len(groups)
    settle_workflows({workflow_id for _, workflow_id, _ in due}, now)
    return ended  # the Kubernetes backend's cleanup, in the same pass, deletes their pods


@transaction.atomic
def groups_end_backend_lost(*, backend: str, reason: str, now: datetime,
                            may_rerun: bool = False) -> int:
    """The groups dispatched to `backend` with a task that started or holds a node there end
    as a gang: their alive tasks FAILED_BACKEND_ERROR (`reason`: `backend_lost`,
    `backend_deleted`), exit code 3001 (OSMO's backend error); the workflows settle as for any
    failed gang. With ``may_rerun`` (a lost backend, which may come back to be fenced) a group
    whose exit actions ask RESCHEDULE for 3001 runs again instead
    (`exits.rescheduled_on_backend_loss`). Returns how many groups ended or run
    again. Groups that never reached a node there are left alone."""
    started = Task.objects.filter(group_id=OuterRef("pk"), status__in=(
        TaskStatus.SCHEDULING, TaskStatus.RUNNING)).exclude(node_name="")
    due = list(WorkflowGroup.objects.filter(backend=backend, status__in=ALIVE_TASK_STATUSES)
               .filter(Exists(started)).values_list("pk", "workflow_id"))
    if not due:
        return 0
    workflow_ids = {workflow_id for _, workflow_id in due}
    lock_workflows(workflow_ids)
    groups = [pk for pk, _ in due]
    if may_rerun:
        groups = [group.pk for group in WorkflowGroup.objects.filter(pk__in=groups)
                  .select_related("workflow__pool__parent")
                  if not exits.rescheduled_on_backend_loss(workflow=group.workflow,
                                                           group=group, now=now)]
    _end_tasks(Task.objects.filter(group_id__in=groups), TaskStatus.FAILED_BACKEND_ERROR,
               reason, now, exit_code=exits.BACKEND_ERROR)
    settle_workflows(workflow_ids, now)
    return len(due)


def tasks_evict_from_node(*, node_name: str, reason: str, now: datetime) -> int:
    """A node is removed: its bound tasks end FAILED_EVICTED and their gangs fail."""
    bound = Task.objects.filter(node_name=node_name,
                                status__in=(TaskStatus.SCHEDULING, TaskStatus.RUNNING))
    workflow_ids = set(bound.values_list("workflow_id", flat=True))
    lock_workflows(workflow_ids)
    ids = list(bound.values_list("id", flat=True))
    count = Task.objects.filter(pk__in=ids).update(status=TaskStatus.FAILED_EVICTED,
                                                   reason=reason, finished_at=now)
    logstore.events_record_tasks(ids, "Evicted", f"{words(reason)} (node {node_name})", now)
    settle_workflows(workflow_ids, now)
    return count


# --- a real cluster's reports (the Kubernetes backend) --------------------------------------

def task_observed(*, workflow_name: str, task_name: str, status: str, node: str = "",
                  exit_code: int | None = None, reason: str | None = None) -> bool:
    """Apply what the cluster says of a task's pod; True when something changed.

    A re-delivered event or a re-list is not a forward move and changes nothing. A pod that
    is bound but still starting (SCHEDULING with a node) records the node, so the task holds
    its GPUs from the binding on, as on the embedded cluster.
    """
    return tasks_observed([TaskObservation(workflow_name, task_name, status, node, exit_code,
                                           reason)]) > 0


@dataclass(frozen=True)
class TaskObservation:
    """What the cluster says of one task's pod (:func:`task_observed`'s arguments)."""

    workflow_name: str
    task_name: str
    status: str
    node: str = ""
    exit_code: int | None = None
    reason: str | None = None
    # The group's run the pod belongs to (None: unchecked); a pod of an earlier run — its
    # group was rescheduled since — says nothing of the task.
    retry_id: int | None = None


# tasks_observed's reads: the workflows locked in id order (as lock_workflows does) and their
# tasks, by arrays — one statement text whatever the batch, so it is prepared once per
# connection (with IN lists, each batch's length made a new statement, compiled and planned).
_LOCK_OBSERVED = ("SELECT id, name FROM workflows_workflow WHERE name = ANY(%s::text[]) "
                  "ORDER BY id FOR UPDATE")
# in the model's order, as Model.from_db reads a row of some of its fields
_OBSERVED = [f for f in Task._meta.concrete_fields
             if f.attname in {"id", "workflow_id", "name", "status", "node_name", "retry_id"}]
_OBSERVED_FIELDS = [f.attname for f in _OBSERVED]
_OBSERVED_TASKS = (f"SELECT {', '.join(f.column for f in _OBSERVED)} FROM {Task._meta.db_table} "
                   "WHERE workflow_id = ANY(%s::bigint[]) AND name = ANY(%s::text[])")


@transaction.atomic
def tasks_observed(observations: Sequence[TaskObservation]) -> int:
    """:func:`task_observed` for many pods in one transaction, in their order (a watch
    delivers them in bursts): the workflows locked in id order, bindings and starts in one
    statement each, ends one by one. Returns how many tasks changed."""
    if not observations:
        return 0
    with connection.cursor() as cursor:  # statements of one text whatever the batch: prepared
        cursor.execute(_LOCK_OBSERVED, [sorted({o.workflow_name for o in observations})])
        workflows = {name: pk for pk, name in cursor.fetchall()}
        cursor.execute(_OBSERVED_TASKS, [list(workflows.values()),
                                         sorted({o.task_name for o in observations})])
        tasks = {(task.workflow_id, task.name): task for task in (
            Task.from_db(connection.alias, _OBSERVED_FIELDS, row) for row in cursor.fetchall())}
    bound: dict[int, str] = {}
    started: dict[int, str] = {}
    ends: list[tuple[Task, TaskObservation]] = []
    for seen in observations:
        task = tasks.get((workflows.get(seen.workflow_name), seen.task_name))
        if task is None or task.status in FINAL_TASK_STATUSES or (
                seen.retry_id is not None and seen.retry_id != task.retry_id):
            continue
        if seen.status == TaskStatus.SCHEDULING:
            if seen.node and not task.node_name:
                task.node_name = bound[task.pk] = seen.node
        elif seen.status in FINAL_TASK_STATUSES:
            ends.append((task, seen))
            task.status = seen.status
        elif status_rank(seen.status) > status_rank(task.status):
            task.status, started[task.pk] = seen.status, seen.node
            task.node_name = seen.node or task.node_name
    now = timezone.now()
    changed = _tasks_bound_observed(bound, now) + _tasks_started_observed(started, now)
    by_id = {w.pk: w for w in Workflow.objects.filter(
        pk__in={task.workflow_id for task, _ in ends})} if ends else {}
    for index, (task, seen) in enumerate(ends):
        if index and Task.objects.filter(pk=task.pk).filter(
                Q(status__in=FINAL_TASK_STATUSES) | ~Q(retry_id=task.retry_id)).exists():
            continue  # an earlier end of the batch ended it (a lead's end ends its group) or
            # ran its group again (an exit action's RESCHEDULE)
        changed += 1
        task_report_status(workflow=by_id[task.workflow_id], task_name=task.name,
                           status=seen.status, exit_code=seen.exit_code,
                           node=seen.node or None, reason=seen.reason)
    return changed


def _tasks_bound_observed(bound: Mapping[int, str], now: datetime) -> int:
    """Pods bound but still starting: their tasks record the node (a ``Bound`` event)."""
    if not bound:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH bound AS (UPDATE workflows_task t SET node_name = v.node "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, node) "
            "WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id AND t.node_name = '' "
            "AND t.status = ANY(%s) "
            "RETURNING t.id, t.workflow_id, t.node_name, t.retry_id), "
            "events AS (INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, "
            "message, retry_id) SELECT workflow_id, id, %s, 'Bound', "
            "'bound to node ' || node_name, retry_id FROM bound ORDER BY id) "
            "SELECT count(*) FROM bound",
            [list(bound), list(bound.values()), list(bound), list(ALIVE_TASK_STATUSES), now])
        return cursor.fetchone()[0]


def _tasks_started_observed(started: Mapping[int, str], now: datetime) -> int:
    """Pods Running: their tasks are RUNNING (on the pod's node when it says one), a
    ``Running`` event each, and their groups and workflows are running (settle's rule for a
    start, :func:`tasks_mark_running`)."""
    if not started:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH started AS (UPDATE workflows_task t SET status = %s, "
            "started_at = COALESCE(t.started_at, %s), "
            "node_name = CASE WHEN v.node = '' THEN t.node_name ELSE v.node END "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, node) "
            "WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id AND t.status = ANY(%s) "
            "RETURNING t.id, t.workflow_id, t.node_name, t.retry_id), "
            "events AS (INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, "
            "message, retry_id) SELECT workflow_id, id, %s, 'Running', CASE WHEN node_name = "
            "'' THEN '' ELSE 'on node ' || node_name END, retry_id FROM started ORDER BY id) "
            "SELECT id FROM started",
            [TaskStatus.RUNNING, now, list(started), list(started.values()), list(started),
             [TaskStatus.WAITING, TaskStatus.SCHEDULING], now])
        ids = [row[0] for row in cursor.fetchall()]
    tasks_mark_running(ids, now)
    return len(ids)


@transaction.atomic
def task_moved(*, workflow_name: str, task_name: str, node: str) -> bool:
    """Consolidation on Kubernetes: the task's replacement pod is bound to ``node``. The task
    keeps its status; its node becomes ``node`` and its reason ``consolidated`` records the
    move. A move is from a node: a replacement bound while the task holds none (its pod was
    released, :func:`task_released`) is a binding (:func:`task_observed`). True when something
    changed."""
    workflow = Workflow.objects.select_for_update().filter(name=workflow_name).first()
    if workflow is None or not node:
        return False
    task = Task.objects.filter(workflow=workflow, name=task_name,
                               status__in=ALIVE_TASK_STATUSES).exclude(
        node_name__in=(node, "")).first()
    if task is None:
        return False
    Task.objects.filter(pk=task.pk).update(node_name=node, reason=CONSOLIDATED)
    logstore.events_record([Event(workflow.pk, task.pk, "Moved", "moved by consolidation "
                                  f"from {task.node_name or 'no node'} to {node}")])
    return True


@transaction.atomic
def task_released(*, workflow_name: str, task_name: str, node: str) -> bool:
    """On Kubernetes our scheduler took the task's pod back from ``node`` before it ran
    (another binder took the room, or its gang fell below its minimum) and made an unbound
    replacement: the task, SCHEDULING, waits for a node again instead of failing. True when
    something changed."""
    workflow = Workflow.objects.select_for_update().filter(name=workflow_name).first()
    if workflow is None or not node:
        return False
    task = Task.objects.filter(workflow=workflow, name=task_name, node_name=node,
                               status=TaskStatus.SCHEDULING).first()
    if task is None:
        return False
    Task.objects.filter(pk=task.pk).update(node_name="")
    logstore.events_record([Event(workflow.pk, task.pk, "Released",
                                  f"taken back from node {node} before it ran; waits for a "
                                  f"node again")])
    return True


@transaction.atomic
def task_lost(*, task_id: int, reason: str = "pod_deleted") -> bool:
    """A dispatched task's pod is gone (found by a full re-list): FAILED_EVICTED."""
    workflow_id = Task.objects.filter(pk=task_id).values_list("workflow_id", flat=True).first()
    if workflow_id is None:
        return False
    workflow = Workflow.objects.select_for_update().get(pk=workflow_id)
    task = Task.objects.get(pk=task_id)
    if task.status not in ALIVE_TASK_STATUSES:
        return False
    task_report_status(workflow=workflow, task_name=task.name,
                       status=TaskStatus.FAILED_EVICTED, reason=reason)
    return True


@transaction.atomic
def group_fail_submission(*, group_id: int) -> None:
    """The cluster refused a group's objects for good: its alive tasks end FAILED (reason
    ``submission_failed``) and the workflow settles as for any failed gang."""
    workflow_id = WorkflowGroup.objects.values_list("workflow_id", flat=True).get(pk=group_id)
    workflow = Workflow.objects.select_for_update().select_related("pool").get(pk=workflow_id)
    now = timezone.now()
    group = WorkflowGroup.objects.values_list("name", flat=True).get(pk=group_id)
    logstore.events_record([Event(workflow_id, None, "Refused",
                                  f"group {group}: the cluster refused its objects "
                                  "(code submission_failed)", now)])
    _end_tasks(Task.objects.filter(group_id=group_id), TaskStatus.FAILED,
               "submission_failed", now)
    settle(workflow, now)


# --- the fleet: which backend a group goes to (scheduler/backends/fleet.py decides) --------

def groups_choose_backend(choices: Mapping[int, str]) -> set[int]:
    """Record each group's chosen backend where none is recorded yet and it still waits to
    be scheduled: a conditional update, so of two processes choosing for one group exactly
    one wins. Returns the ids recorded."""
    if not choices:
        return set()
    ids = list(choices)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE workflows_workflowgroup g SET backend = v.backend "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, backend) "
            "WHERE g.id = v.id AND g.id = ANY(%s::bigint[]) AND g.backend IS NULL "
            "AND g.status = %s RETURNING g.id",
            [ids, [choices[i] for i in ids], ids, TaskStatus.SCHEDULING])
        return {row[0] for row in cursor.fetchall()}


def _ran() -> Exists:
    """A task of the group reached a node or started."""
    return Exists(Task.objects.filter(group_id=OuterRef("pk")).filter(
        ~Q(node_name="") | Q(started_at__isnull=False)))


def groups_move_backend(group_ids: Sequence[int], *, source: str, target: str | None,
                        now: datetime, reason: str) -> list[int]:
    """Take not-started groups away from ``source`` (OFFLINE, or a waiting gang another
    backend starts now): to ``target``, or none (chosen again at once). Only groups still
    recorded on ``source``, SCHEDULING, none of whose tasks ever reached a node — a pod that
    ran pins its gang. Returns the ids moved; each workflow gets an event."""
    rows = list(WorkflowGroup.objects.filter(
        pk__in=list(group_ids), backend=source, status=TaskStatus.SCHEDULING)
        .filter(~_ran()).values_list("pk", "workflow_id", "name"))
    if not rows:
        return []
    moved = [pk for pk, _, _ in rows]
    WorkflowGroup.objects.filter(pk__in=moved, backend=source).update(
        backend=target, backend_moved_at=now)
    where = f"to backend {target}" if target else "to be dispatched elsewhere"
    logstore.events_record([Event(workflow_id, None, "BackendMoved",
                                  f"group {name} left backend {source} {where}: {reason}", now)
                            for _, workflow_id, name in rows])
    return moved
