"""Retention deletes a day of history in short batches, from the ended workflows not purged
yet (a partial index), never walking the purged history again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests import factories
from tests.conftest import make_client
from tests.workflows.test_list_plans import nodes, outline, plan_of
from workflows import logstore
from workflows.models import (
    Task,
    TaskEvent,
    TaskLogChunk,
    TaskStatus,
    Workflow,
    WorkflowGroup,
    WorkflowStatus,
)

pytestmark = pytest.mark.django_db


def ended(count: int, *, days_ago: float, prefix: str) -> list[Workflow]:
    """`count` workflows ended `days_ago`, each with a task, two log chunks and two events."""
    pool = factories.pool("team", 10) if not factories.Pool.objects.filter(
        name="team").exists() else factories.Pool.objects.get(name="team")
    owner = make_client(f"{prefix}-owner", "osmo-team-user").user
    at = timezone.now() - timedelta(days=days_ago)
    workflows = Workflow.objects.bulk_create(
        Workflow(name=f"{prefix}-{i}", pool=pool, user=owner, status=WorkflowStatus.COMPLETED,
                 finished_at=at) for i in range(count))
    groups = WorkflowGroup.objects.bulk_create(
        WorkflowGroup(workflow=w, name="main", status=TaskStatus.COMPLETED) for w in workflows)
    tasks = Task.objects.bulk_create(
        Task(group=g, workflow=w, pool=pool, priority="NORMAL", name="main",
             status=TaskStatus.COMPLETED) for w, g in zip(workflows, groups, strict=True))
    TaskLogChunk.objects.bulk_create(
        TaskLogChunk(workflow_id=t.workflow_id, task=t, lines=1, size=2, text=f"{line}\n")
        for t in tasks for line in "ab")
    TaskEvent.objects.bulk_create(
        TaskEvent(workflow_id=t.workflow_id, task=t, at=at, reason="Completed")
        for t in tasks for _ in "ab")
    return workflows


def test_retention_deletes_in_batches_and_never_twice(settings):
    settings.OSMO_LOG_RETENTION_DAYS = 30
    old = ended(5, days_ago=31, prefix="old")
    recent = ended(2, days_ago=29, prefix="recent")
    with CaptureQueriesContext(connection) as queries:
        assert logstore.purge(batch=2) == (10, 10)
    deletes = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith("DELETE FROM \"workflows_tasklogchunk\"")]
    assert len(deletes) == 3  # 2 + 2 + 1 workflows, each batch its own transaction
    assert set(Workflow.objects.filter(logs_purged=True).values_list("name", flat=True)) == \
        {w.name for w in old}
    kept = {w.pk for w in recent}
    assert set(TaskLogChunk.objects.values_list("workflow_id", flat=True)) == kept
    assert set(TaskEvent.objects.values_list("workflow_id", flat=True)) == kept
    assert Workflow.objects.count() == 7  # the workflows themselves stay (history)
    with CaptureQueriesContext(connection) as again:
        assert logstore.purge(batch=2) == (0, 0)
    assert not [q for q in again.captured_queries if q["sql"].startswith(
        ('DELETE FROM "workflows_tasklogchunk"', 'DELETE FROM "workflows_taskevent"'))]


def test_a_batch_is_read_from_the_partial_index(settings):
    ended(300, days_ago=400, prefix="purged")
    Workflow.objects.update(logs_purged=True)
    ended(3, days_ago=31, prefix="due")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_workflow")
    with CaptureQueriesContext(connection) as queries:
        assert logstore.purge() == (6, 6)
    batch = next(q["sql"] for q in queries.captured_queries
                 if q["sql"].startswith("SELECT") and '"logs_purged"' in q["sql"])
    plan = plan_of(batch)
    names = {node.get("Index Name") for node in nodes(plan)}
    assert "workflow_logs_to_purge" in names, outline(plan)
    assert not [n for n in nodes(plan) if n["Node Type"] == "Seq Scan"], outline(plan)


def test_the_trim_reads_only_logs_being_written(settings):
    ended(3000, days_ago=5, prefix="old")  # kept, not written any more
    ended(2, days_ago=0.1, prefix="just")  # ended within the day: still read
    with connection.cursor() as cursor:
        for table in ("workflows_workflow", "workflows_tasklogchunk", "workflows_workflowgroup"):
            cursor.execute(f"ANALYZE {table}")
    settings.OSMO_LOG_TASK_MAX_BYTES = 2  # every log (4 B) is over it; the old not read
    with CaptureQueriesContext(connection) as queries:
        logstore.purge(batch=500)
    over = next(q["sql"] for q in queries.captured_queries if "SUM(" in q["sql"])
    plan = plan_of(over)
    assert TaskLogChunk.objects.count() == 6002  # the old ones not trimmed: not written
    assert TaskLogChunk.objects.filter(workflow__name__startswith="just").count() == 2
    assert not [n for n in nodes(plan) if n["Node Type"] == "Seq Scan"
                and n.get("Relation Name") == "workflows_tasklogchunk"], outline(plan)
