"""Workflow admission (API.md "Workflows", seed 002 "Core Rules").

Order of checks: the spec parses (400 `invalid_spec`), then — in one transaction with the target
pool row and its parent locked — the subpool is ACTIVE (409 `subpool_not_active`), a HIGH/NORMAL
parent submission fits the unallocated share (409 `exceeds_unallocated`), and no group needs more
GPUs to start than the target's quota (409 `exceeds_quota`; a group's minimum, as KAI starts an
elastic gang with the pods its minMember/minSubGroup require). LOW skips both quota checks.

The rows are locked FOR SHARE: submissions do not wait for each other, while a subpool change
(which takes FOR UPDATE on the same rows) cannot interleave with one. A rejected submission writes
nothing, not even the name counter (an admitted one takes its number after the checks,
``numbering``); an accepted one is committed before the response is sent.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from osmo import events
from osmo.errors import Conflict, Forbidden, OsmoError
from osmo.limits import input_limits
from pools.locking import POOL_FAMILY_LOCK
from pools.models import Pool, PoolStatus, SubpoolState
from pools.quota import unallocated
from pools.selectors import pool_not_found
from scheduler.core.decode import QuantityError, Requests, gang_of, pod_requests
from scheduler.core.kai_names import SUBGROUP_LABEL, podgroup_name, queue_name_for
from scheduler.core.model import Pod as CorePod
from scheduler.core.readiness import InvalidGang, build_tree, minimum_gpus

from . import credential_uses, metrics, node_fit, numbering, parsed_specs, ports
from .insert import insert_admitted
from .models import (
    ALIVE_WORKFLOW_STATUSES,
    QUOTA_PRIORITIES,
    Priority,
    Task,
    TaskStatus,
    Workflow,
    WorkflowGroup,
    WorkflowKind,
    WorkflowStatus,
)
from .spec import SpecError, WorkflowSpec, parse_workflow_spec
from .spec.apiserver_rules import check_workload

PRIORITIES = frozenset(Priority.values)  # Django builds `values` anew at each read


@dataclass
class Admission:
    """What a submission created (or, for a dry run, would create)."""

    workflow: Workflow
    groups: list[WorkflowGroup]
    tasks: list[Task]
    spec: WorkflowSpec | None  # None for a workload (its manifests are stored instead)


def validate_priority(priority: str | None) -> str:
    value = (priority or Priority.NORMAL).upper()
    if value not in PRIORITIES:
        raise OsmoError("invalid_request", f"priority must be HIGH, NORMAL or LOW, not "
                                           f"'{priority}'.", errors={"priority": ["Unknown."]})
    return value


def parse_for_pool(pool: Pool, source, *, set_variables=(), set_string_variables=()
                   ) -> WorkflowSpec:
    """Parse with the pool's platforms (subpools inherit their parent's); a spec parsed before
    with the same inputs is reused (:mod:`.parsed_specs`)."""
    settings_pool = pool.parent if pool.is_subpool else pool
    platforms = list(settings_pool.platforms or {})
    default_platform = settings_pool.default_platform or None
    set_variables, set_string_variables = list(set_variables or ()), list(
        set_string_variables or ())
    limits = input_limits()
    key = parsed_specs.key_of(source, set_variables=set_variables,
                              set_string_variables=set_string_variables, platforms=platforms,
                              default_platform=default_platform, limits=limits)
    spec = parsed_specs.get(key)
    if spec is not None:
        return spec
    # Levels are checked against the stored cluster Topology, read only if the spec needs it.
    topologies = parsed_specs.Watched(ports.scheduling().topologies())
    try:
        spec = parse_workflow_spec(
            source, set_variables=set_variables, set_string_variables=set_string_variables,
            platforms=platforms, default_platform=default_platform, topologies=topologies,
            limits=limits)
    except SpecError as error:
        raise OsmoError(getattr(error, "code", "invalid_spec"), "The workflow spec is not valid: "
                        + "; ".join(f"{path}: {messages[0]}"
                                    for path, messages in list(error.errors.items())[:3]),
                        errors={path: list(messages) for path, messages in error.errors.items()}
                        ) from error
    parsed_specs.keep(key, spec, topologies)
    return spec


def exec_timeout(spec: WorkflowSpec | None) -> int | None:
    """Each group's exec_timeout: the spec's (400 `invalid_spec` above
    `OSMO_MAX_EXEC_TIMEOUT`), else `OSMO_DEFAULT_EXEC_TIMEOUT` capped by that maximum."""
    asked = (spec.exec_timeout_seconds or None) if spec is not None else None  # 0: unset
    maximum = settings.OSMO_MAX_EXEC_TIMEOUT
    if asked is not None and maximum is not None and asked > maximum:
        path = "workflow.timeout.exec_timeout"
        message = (f"{asked} s is above this platform's maximum exec_timeout of {maximum} s "
                   "(OSMO_MAX_EXEC_TIMEOUT)")
        raise OsmoError("invalid_spec", f"The workflow spec is not valid: {path}: {message}",
                        errors={path: [message]})
    if asked is None:
        asked = settings.OSMO_DEFAULT_EXEC_TIMEOUT
        if asked is not None and maximum is not None:
            asked = min(asked, maximum)
    return asked or None


def check_quota(*, target: Pool, parent: Pool, spec_total: int, largest_group: int,
                priority: str) -> None:
    """Checks 3-5 of API.md, with the rows already locked."""
    settings_pool = parent
    if settings_pool.status != PoolStatus.ONLINE:
        raise Conflict("pool_not_online",
                       f"Pool '{parent.name}' is {settings_pool.status}: it takes no new "
                       f"workflows.")
    if target.is_subpool and target.subpool_state != SubpoolState.ACTIVE:
        raise Conflict("subpool_not_active",
                       f"Subpool '{target.name}' is {target.subpool_state} and takes no new "
                       f"workflows.")
    if priority not in QUOTA_PRIORITIES:
        return  # LOW is opportunistic and preemptible
    if target.is_subpool:
        quota, what = target.quota_gpus, f"subpool '{target.name}' quota"
    else:
        # Kept on the parent row by the subpool services and read through this transaction's
        # FOR SHARE lock, which fetches the row's latest committed version.
        has_subpools, allocated = parent.active_subpools > 0, parent.allocated_gpus
        quota = unallocated(parent.quota_gpus, allocated=allocated if has_subpools else 0)
        what = (f"unallocated share of pool '{parent.name}'" if has_subpools
                else f"pool '{parent.name}' quota")
        if has_subpools and spec_total > quota:
            subpools = list(parent.subpools.filter(subpool_state=SubpoolState.ACTIVE)
                            .order_by("name").values_list("name", flat=True)[:5])
            raise Conflict(
                "exceeds_unallocated",
                f"The workflow requests {spec_total} GPUs but pool '{parent.name}' has only "
                f"{quota} unallocated GPUs ({allocated} of its {parent.quota_gpus} are in "
                f"subpools). Submit to a subpool ({', '.join(subpools)}) or with priority LOW.",
            )
    if largest_group > quota:
        raise Conflict(
            "exceeds_quota",
            f"A group needs {largest_group} GPUs at once to start but the {what} is {quota} GPUs,"
            f" so it "
            f"could never run at {priority}. Use a pool with more quota or priority LOW.",
        )


def _minimum_gpus(fields: dict, pods: list[tuple[str, str | None, int]]) -> int:
    """GPUs of the pods a gang needs to start (its minimum), its gang fields read as the
    scheduler reads them (``decode.gang_of``); all its GPUs if they cannot be read (the spec
    validation reports those)."""
    gang = gang_of("admission", fields, tuple(CorePod(name, subgroup=subgroup, gpus=gpus)
                                              for name, subgroup, gpus in pods))
    if (not gang.subgroups and gang.min_subgroup is None and gang.min_member is not None
            and gang.min_member >= len(pods)):
        return sum(pod.gpus for pod in gang.pods)  # a plain gang: every pod
    try:
        return minimum_gpus(build_tree(gang))
    except InvalidGang:
        return sum(pod.gpus for pod in gang.pods)


def _spec_group_minimum(group) -> int:
    fields = group.podgroup_spec_fields()
    pods = [(f"{task.name}-{replica}", task.subgroup if fields.get("subGroups") else None,
             task.resource.gpus) for task in group.tasks for replica in range(task.replicas)]
    return _minimum_gpus(fields, pods)


def _unit_minimum(unit) -> int:
    spec = unit.manifests.podgroup["spec"]
    pods = [(pod["metadata"]["name"],
             (pod["metadata"].get("labels") or {}).get(SUBGROUP_LABEL)
             if spec.get("subGroups") else None, _pod_requests(pod).gpus)
            for pod in unit.manifests.pods]
    return _minimum_gpus(spec, pods)


def _peek_name(spec_name: str) -> str:
    """The name a submission would get now (dry runs write nothing, not even the counter)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM workflows_workflownamecounter WHERE spec_name = %s",
                       [spec_name])
        row = cursor.fetchone()
    return f"{spec_name}-{(row[0] if row else 0) + 1}"


def _next_name(spec_name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(numbering.TAKE, [spec_name])  # in the caller's transaction
        return f"{spec_name}-{cursor.fetchone()[0]}"


def sleep_seconds(command, args=()) -> int | None:
    """`sleep N` (as a command list or a shell string): how long the embedded cluster runs it."""
    words = [str(w) for w in (*command, *args)]
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] == "-c":
        words = words[2:]  # `sh -c "sleep 30; exit 3"`
    if len(words) == 1:
        words = words[0].split()
    if len(words) >= 2 and words[0].rsplit("/", 1)[-1] == "sleep":
        try:
            return max(0, int(float(words[1].rstrip(";"))))
        except ValueError:
            return None
    return None


_EXIT = re.compile(r"(?:^|[;&|]\s*)exit\s+(\d{1,4})\s*$")


def sim_exit_code(command, args=()) -> int | None:
    """A shell string that ends `exit M` (`sleep 30; exit 3`): the code the embedded cluster
    ends the task with, once it has run (None: 0)."""
    match = _EXIT.search(" ".join(str(w) for w in (*command, *args)).strip())
    return int(match.group(1)) if match and int(match.group(1)) else None


def _numbered_in_insert(spec: WorkflowSpec) -> bool:
    """Are the workflow's PodGroup names plain joins ("{spec}-{n}-{group}") whatever its
    number (up to ten digits)? Then the insert numbers the workflow itself: the name
    counter's row — every submission of this spec name queues on it until its holder commits —
    is held for one statement and the commit, not for the statements and the Python between."""
    return all(podgroup_name(f"{spec.name}-{n}", group.name) == f"{spec.name}-{n}-{group.name}"
               for n in (1, 9_999_999_999) for group in spec.groups)


def _build(spec: WorkflowSpec, *, name: str, pool: Pool, priority: str, actor, source: str,
           set_variables, set_string_variables, kind: str,
           labels: dict[str, str] | None = None, numbered: bool = False) -> Admission:
    """``numbered``: ``name`` is the spec's name and each PodGroup is named as its group; the
    insert gives both their final names (:func:`_numbered_in_insert`)."""
    workflow = Workflow(
        name=name, kind=kind, pool=pool, priority=priority,
        user=actor if getattr(actor, "is_authenticated", False) else None,
        status=WorkflowStatus.PENDING, spec=source if isinstance(source, str) else "",
        rendered_spec=spec.rendered_text or "", set_variables=list(set_variables or ()),
        set_string_variables=list(set_string_variables or ()), gpus_requested=spec.total_gpus,
        labels={**spec.labels, **(labels or {})}, exec_timeout_seconds=exec_timeout(spec),
        queue_timeout_seconds=spec.queue_timeout_seconds or None,
    )
    workflow.submitted_at = timezone.now()
    settings_pool = pool.parent if pool.is_subpool else pool
    platforms = settings_pool.platforms or {}
    groups, tasks = [], []
    for group_index, group_spec in enumerate(spec.groups):
        status = TaskStatus.WAITING if group_spec.depends_on else TaskStatus.SCHEDULING
        group = WorkflowGroup(workflow=workflow, name=group_spec.name, position=group_index,
                              status=status, depends_on=list(group_spec.depends_on),
                              lead_task=group_spec.lead, gpus=group_spec.gpus,
                              podgroup=group_spec.name if numbered
                              else podgroup_name(name, group_spec.name),
                              gang=group_spec.podgroup_spec_fields(),
                              scheduling_at=None if group_spec.depends_on
                              else workflow.submitted_at)
        groups.append(group)
        for task_spec in group_spec.tasks:
            replicas = [None] if task_spec.replicas == 1 else range(task_spec.replicas)
            selector = (platforms.get(task_spec.platform) or {}).get("node_selector") or {}
            for replica in replicas:
                tasks.append(Task(
                    group=group, workflow=workflow, pool=pool, priority=priority,
                    name=task_spec.name if replica is None else f"{task_spec.name}-{replica}",
                    spec_task=task_spec.name, replica=replica, position=len(tasks),
                    status=status, gpus=task_spec.resource.gpus,
                    cpu_millis=task_spec.resource.cpu_millicores or 0,
                    memory_bytes=task_spec.resource.memory_bytes or 0,
                    node_selector=dict(selector), subgroup=task_spec.subgroup or "",
                    run_seconds=sleep_seconds(task_spec.command, task_spec.args),
                    sim_exit_code=sim_exit_code(task_spec.command, task_spec.args),
                    exit_actions=dict(task_spec.exit_actions),
                ))
    return Admission(workflow, groups, tasks, spec)


_LOCK_BY_NAME = f"""
SELECT {{columns}} FROM pools p, LATERAL (SELECT pg_advisory_xact_lock_shared({POOL_FAMILY_LOCK},
    coalesce((SELECT q.id FROM pools q WHERE q.name = p.parent_pool), p.id)::int)) family
WHERE p.name = %s FOR SHARE OF p
"""


def _platform_settings(pool: Pool) -> tuple:
    settings_pool = pool.parent if pool.is_subpool else pool
    return settings_pool.platforms, settings_pool.default_platform


# The target pools as last read without a lock, by name, for a few seconds: a submission
# parses its spec with their platforms before any lock, and the locked read decides 404/403
# again and parses again when the platforms changed meanwhile, so a stale entry costs at most a
# second parse, never a wrong admission (and a spec error is answered after a fresh read, so
# it never hides a pool's 404).
UNLOCKED_SECONDS = 5.0
_unlocked: dict[str, tuple[float, Pool]] = {}


def _visible_target(pool: Pool | str, roles=None, *, fresh: bool = False) -> Pool:
    """The target pool and its parent, read without a lock (404/403 as `_locked_target`)."""
    name = pool if isinstance(pool, str) else pool.name
    now = time.monotonic()
    cached = None if fresh else _unlocked.get(name)
    if cached is not None and now - cached[0] < UNLOCKED_SECONDS:
        target = cached[1]
    else:
        target = Pool.objects.select_related("parent").filter(name=name).first()
        if len(_unlocked) >= 1024:
            _unlocked.clear()
        if target is not None:
            _unlocked[name] = (now, target)
    if target is None or target.archived_at is not None or (
            target.is_subpool and target.parent.archived_at is not None):
        raise pool_not_found(name)
    if roles is not None and not roles.can_view(target.top_level_name):
        raise Forbidden(f"You have no role on pool '{target.top_level_name}'.")
    return target


@cache
def _pool_columns() -> tuple[str, list[str], list[tuple]]:
    """The pools table's columns, their attribute names and the converters of those that
    have any (``Pool.objects.raw`` works these out again on every call: most of a locked read's
    CPU)."""
    fields, table = Pool._meta.concrete_fields, Pool._meta.db_table
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(table)
        found = [*connection.ops.get_db_converters(column), *field.get_db_converters(connection)]
        if found:
            converters.append((index, column, found))
    return (", ".join(f"p.{connection.ops.quote_name(f.column)}" for f in fields),
            [f.attname for f in fields], converters)


def _locked_pool(sql: str, name: str) -> Pool | None:
    """The one pool row `sql` (selecting ``{columns}`` of ``pools p``) finds for `name`."""
    columns, names, converters = _pool_columns()
    with connection.cursor() as cursor:
        cursor.execute(sql.format(columns=columns), [name])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, column, functions in converters:
        for function in functions:
            values[index] = function(values[index], column, connection)
    return Pool.from_db(connection.alias, names, values)


def _locked_target(pool: Pool | str, roles=None) -> Pool:
    """The target pool (by row or by name) with its parent, both locked FOR SHARE after the
    family lock, in one round trip for a top-level pool. By name, `roles` decide visibility:
    an unknown or archived pool is 404, a known one without access 403."""
    name = pool if isinstance(pool, str) else pool.name
    target = _locked_pool(_LOCK_BY_NAME, name)
    if target is None or target.archived_at is not None:
        raise pool_not_found(name)
    if target.is_subpool:
        target.parent = _locked_pool("SELECT {columns} FROM pools p WHERE p.name = %s FOR SHARE",
                                     target.parent_id)
        if target.parent.archived_at is not None:
            raise pool_not_found(name)
    if roles is not None and not roles.can_view(target.top_level_name):
        raise Forbidden(f"You have no role on pool '{target.top_level_name}'.")
    return target


def _admitted_how(workflow: Workflow) -> str:
    if workflow.priority in QUOTA_PRIORITIES:
        return f"within the quota of pool {workflow.pool.name}"
    # LOW skips the quota checks: it may run on GPUs beyond the quota, and be preempted.
    return (f"at LOW priority, without a quota check: it may run beyond the quota of pool "
            f"{workflow.pool.name} and is preemptible")


def _save(admission: Admission, *, numbered: str | None = None) -> Admission:
    workflow = admission.workflow
    by = workflow.user.get_username() if workflow.user else "an anonymous caller"
    # The workflow's first events go in the same statement as its rows.
    insert_admitted(workflow, admission.groups, admission.tasks, numbered=numbered, events=[
        ("Submitted", f"by {by} to pool {workflow.pool.name} at {workflow.priority} "
                      f"priority, {workflow.gpus_requested} GPU(s)"),
        ("Admitted", f"{_admitted_how(workflow)}; {len(admission.groups)} group(s) queued")])
    events.publish(events.WorkflowAdmitted(workflow=workflow.name, pool=workflow.pool.name))
    return admission


@metrics.counted("workflow")
def workflow_submit(*, actor, pool: Pool | str, source, priority: str | None = None,
                    set_variables=(), set_string_variables=(), dry_run: bool = False,
                    roles=None, labels: dict[str, str] | None = None,
                    app: tuple[str, str, int] | None = None) -> Admission:
    """Admit a workflow into `pool` (a Pool, or a name checked against `roles`: 404/403);
    see the module docstring. `labels` override the spec's own; `app` (uuid, name, version)
    is the app version the spec comes from, recorded on the workflow."""
    # Parse before any lock: a large spec costs its own request time, never its pool's lock.
    unlocked = _visible_target(pool, roles)
    priority = validate_priority(priority)
    try:
        spec = parse_for_pool(unlocked, source, set_variables=set_variables,
                              set_string_variables=set_string_variables)
    except OsmoError:
        fresh = _visible_target(pool, roles, fresh=True)  # the pool's 404/403 come first
        if _platform_settings(fresh) == _platform_settings(unlocked):
            raise
        unlocked = fresh  # the platforms changed since they were read: parse with the new
        spec = parse_for_pool(unlocked, source, set_variables=set_variables,
                              set_string_variables=set_string_variables)
    exec_timeout(spec)  # above the maximum: 400 before any lock
    credential_uses.check(actor=actor, spec=spec)  # another's credential: 403, nothing written
    node_fit.check_tasks_fit_a_node(unlocked, spec)  # a pod no node holds: 400, any priority
    # Inside a caller's transaction the number is taken in it (its rollback returns it).
    own_transaction = not connection.in_atomic_block
    with transaction.atomic():
        target = _locked_target(pool, roles)
        if _platform_settings(target) != _platform_settings(unlocked):  # changed meanwhile
            spec = parse_for_pool(target, source, set_variables=set_variables,
                                  set_string_variables=set_string_variables)
        check_quota(target=target, parent=target.parent if target.is_subpool else target,
                    spec_total=spec.total_gpus,
                    largest_group=max((_spec_group_minimum(group) for group in spec.groups),
                                      default=0),
                    priority=priority)
        number = numbering.take(spec.name) if own_transaction and not dry_run else None
        numbered = not dry_run and number is None and _numbered_in_insert(spec)
        name = (f"{spec.name}-{number}" if number is not None else spec.name if numbered
                else _peek_name(spec.name) if dry_run else _next_name(spec.name))
        admission = _build(spec, name=name, pool=target, priority=priority, actor=actor,
                           source=source, set_variables=set_variables,
                           set_string_variables=set_string_variables,
                           kind=WorkflowKind.WORKFLOW, labels=labels, numbered=numbered)
        if app is not None:
            workflow = admission.workflow
            workflow.app_uuid, workflow.app_name, workflow.app_version = app
        return admission if dry_run else _save(admission,
                                               numbered=spec.name if numbered else None)


@metrics.counted("workload")
def workload_submit(*, actor, pool: Pool, manifest, priority: str | None = None) -> Admission:
    """Admit a Kubernetes workload: the pod grouper makes its PodGroups and pods, tracked as a
    workflow of kind "workload" (one group per PodGroup, one task per pod). The pods are named
    after the workload, whose number is read before grouping and taken in the admitting
    transaction: a refused workload leaves the numbering as it was."""
    if priority is not None:
        priority = validate_priority(priority)
    problems: dict[str, list[str]] = {}
    for path, problem in check_workload(manifest):
        problems.setdefault(path, []).append(problem)
    if problems:  # what the API server would refuse with a 422 at dispatch
        raise OsmoError("invalid_spec", "The workload is not valid: " + "; ".join(
            f"{path}: {messages[0]}" for path, messages in list(problems.items())[:3]),
            errors=problems)
    items = manifest.get("items") if isinstance(manifest, dict) and manifest.get(
        "kind") == "List" else [manifest]
    first = items[0] if items and isinstance(items[0], dict) else {}
    base = podgroup_name(str(first.get("kind", "workload")).lower(),
                         str((first.get("metadata") or {}).get("name", "workload")))[:50]
    name = _peek_name(base)
    grouping = _group(manifest, pool=pool, priority=priority, name=name)
    own_transaction = not connection.in_atomic_block  # as in workflow_submit
    with transaction.atomic():
        target = _locked_target(pool)
        _check_given_names(grouping)
        check_quota(target=target, parent=target.parent if target.is_subpool else target,
                    spec_total=grouping.gpus,
                    largest_group=max((_unit_minimum(unit) for unit in grouping.groups),
                                      default=0),
                    priority=grouping.priority)
        number = numbering.take(base) if own_transaction else None
        taken = f"{base}-{number}" if number is not None else _next_name(base)
        if taken != name:  # a workload of the same name was admitted meanwhile: rename the pods
            name, grouping = taken, _group(manifest, pool=pool, priority=priority, name=taken)
        workflow = Workflow(name=name, kind=WorkflowKind.WORKLOAD, pool=target,
                            priority=grouping.priority,
                            user=actor if getattr(actor, "is_authenticated", False) else None,
                            status=WorkflowStatus.PENDING, gpus_requested=grouping.gpus,
                            manifests=grouping.manifests(), exec_timeout_seconds=exec_timeout(None))
        groups, tasks = [], []
        for index, unit in enumerate(grouping.groups):
            spec = unit.manifests.podgroup["spec"]
            gang = {key: spec[key] for key in GANG_FIELDS if key in spec}
            group = WorkflowGroup(workflow=workflow, name=unit.name, position=index,
                                  status=TaskStatus.SCHEDULING, podgroup=unit.name,
                                  gpus=unit.gpus, lead_task=unit.pod_names[0], gang=gang,
                                  scheduling_at=timezone.now())
            groups.append(group)
            for pod in unit.manifests.pods:
                requests = _pod_requests(pod)
                labels = pod["metadata"].get("labels") or {}
                tasks.append(Task(
                    group=group, workflow=workflow, pool=target, priority=grouping.priority,
                    name=pod["metadata"]["name"], spec_task=pod["metadata"]["name"],
                    position=len(tasks), status=TaskStatus.SCHEDULING,
                    gpus=requests.gpus, cpu_millis=requests.cpu,
                    memory_bytes=requests.memory,
                    node_selector=dict(pod["spec"].get("nodeSelector") or {}),
                    subgroup=labels.get(SUBGROUP_LABEL, "") if gang.get("subGroups") else "",
                    run_seconds=sleep_seconds(*_first_command(pod))))
        return _save(Admission(workflow, groups, tasks, spec=None))


def _group(manifest: dict, *, pool: Pool, priority: str | None, name: str):
    scheduling = ports.scheduling()
    namespace = scheduling.cluster_namespace()
    leaf = queue_name_for(pool.name, namespace)
    return scheduling.group_workload(
        manifest, namespace=namespace, default_queue=leaf, allowed_queues={leaf},
        priority=priority, name_prefix=name, max_pods=input_limits().max_pods,
        max_subgroups=input_limits().max_subgroups)


def _check_given_names(grouping) -> None:
    """A given PodGroup keeps its name (API.md: taken as given), so it must not be the name of
    a PodGroup still alive: 409 `podgroup_exists`."""
    given = [group for group in grouping.groups if group.grouper == "given"]
    if not given:
        return
    taken = sorted(set(WorkflowGroup.objects.filter(
        podgroup__in=[group.name for group in given],
        workflow__status__in=ALIVE_WORKFLOW_STATUSES,
    ).values_list("podgroup", flat=True)))
    pods = [name for group in given for name in group.pod_names]
    taken += sorted(set(Task.objects.filter(
        name__in=pods, workflow__kind=WorkflowKind.WORKLOAD,
        workflow__status__in=ALIVE_WORKFLOW_STATUSES).values_list("name", flat=True)))
    if taken:
        raise Conflict("podgroup_exists",
                       f"{', '.join(taken)} already exist(s) in an alive workload: a given "
                       "PodGroup and its pods keep their names, so pick others or wait until "
                       "it ends.",
                       errors={"metadata.name": [f"'{name}' is in use." for name in taken]})


GANG_FIELDS = ("minMember", "minSubGroup", "subGroups", "topologyConstraint")


def _pod_requests(pod: dict) -> Requests:
    """What a pod is charged, as the scheduler reads it (``decode.pod_requests``: init
    containers and sidecars counted as Kubernetes counts them)."""
    try:
        return pod_requests(pod, strict=True)
    except QuantityError as error:
        raise OsmoError("invalid_spec", f"Pod {pod['metadata']['name']}: {error.detail}",
                        errors={error.field: [error.detail]}) from None


def _first_command(pod: dict) -> tuple[list, list]:
    containers = pod.get("spec", {}).get("containers") or [{}]
    return containers[0].get("command") or [], containers[0].get("args") or []
