"""The Kubernetes backend's pass reads the alive groups, not the history: its searches (the
cleaner's ended groups and rescheduled ones, dispatch's runnable groups, the timeout check) — the
first three once walked every group
and dispatch ever made — 134 ms a pass with 300,000 ended groups and 4,000 alive ones, once a
second, growing with every workflow run. At this test's size a sequential scan is the planner's
cheaper choice, so the test turns those off to see that a path reading only the alive rows
exists; with 300,000 ended groups the planner took those paths by itself."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler import services
from scheduler.backends.kubernetes.cleanup import Cleaner
from scheduler.backends.kubernetes.dispatch import Dispatcher
from scheduler.models import GroupDispatch
from tests import factories
from workflows.models import TaskStatus, Workflow, WorkflowGroup, WorkflowStatus

pytestmark = pytest.mark.django_db

HISTORY, ALIVE = 3000, 20


def _workflows(pool, count: int, prefix: str, status: str, group_status: str, *,
               dispatched: bool, cleaned: bool = False) -> list[WorkflowGroup]:
    now = timezone.now()
    workflows = Workflow.objects.bulk_create(
        [Workflow(name=f"{prefix}-{i}", pool=pool, priority="NORMAL", gpus_requested=1,
                  status=status, exec_timeout_seconds=3600, queue_timeout_seconds=3600,
                  started_at=now) for i in range(count)])
    groups = WorkflowGroup.objects.bulk_create(
        [WorkflowGroup(workflow=w, name="group", podgroup=w.name, status=group_status, gpus=1,
                       started_at=now, scheduling_at=now) for w in workflows])
    if dispatched:
        GroupDispatch.objects.bulk_create(
            [GroupDispatch(group=g, namespace="osmo", applied_at=now,
                           cleaned_at=now if cleaned else None) for g in groups])
    return groups


def test_the_backend_pass_reads_the_alive_groups_not_the_history(settings) -> None:
    settings.OSMO_NAMESPACE = "osmo"
    pool = factories.pool("team", 64)
    _workflows(pool, HISTORY, "done", WorkflowStatus.COMPLETED, TaskStatus.COMPLETED,
               dispatched=True, cleaned=True)
    _workflows(pool, ALIVE, "run", WorkflowStatus.RUNNING, TaskStatus.RUNNING, dispatched=True)
    waiting = _workflows(pool, 2, "new", WorkflowStatus.PENDING, TaskStatus.SCHEDULING,
                         dispatched=False)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_workflow, workflows_workflowgroup, "
                       "scheduler_groupdispatch")
        cursor.execute("SET LOCAL enable_seqscan = off")
    plans: list[str] = []

    def explain(execute, sql, params, many, context):
        if sql.lstrip().startswith("SELECT"):
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE) " + sql, params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        assert Cleaner(None, namespace="osmo").run_once() == 0
        runnable = Dispatcher(None, namespace="osmo").runnable(timezone.now())
        assert sorted(group.pk for group in runnable) == sorted(g.pk for g in waiting)
        assert services.timeouts_enforce(now=timezone.now() + timedelta(minutes=1)) == 0

    assert len(plans) == 4  # the four searches; nothing found, nothing more read
    for plan in plans:
        assert not re.search(r"Seq Scan on (workflows_workflow|scheduler_groupdispatch)", plan), \
            plan
        removed = sum(map(int, re.findall(r"Rows Removed by (?:Join )?Filter: (\d+)", plan)))
        assert removed <= ALIVE + 2, plan
    assert WorkflowGroup.objects.filter(status=TaskStatus.RUNNING).count() == ALIVE
    assert GroupDispatch.objects.filter(cleaned_at__isnull=True).count() == ALIVE
