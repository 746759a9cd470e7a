"""The periodic passes read what is alive, not the history: with a few thousand ended
workflows and ANALYZE, the embedded cluster's completion pass, the timeout pass and the usage
sample read no big table by a Seq Scan."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools import services as pool_services
from tests.workflows.test_list_plans import (  # noqa: F401 (history: the fixture)
    BIG_TABLES,
    history,
    outline,
    plan_of,
    whole_history_reads,
)
from workflows import lifecycle, logstore

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("history")]


def history_reads(call) -> list[tuple[str, str]]:
    """(statement, outline) of each SELECT of the call over a big table that reads all."""
    with CaptureQueriesContext(connection) as queries:
        call()
    found, read = [], 0
    for query in queries.captured_queries:
        sql = query["sql"]
        if sql.startswith(("SELECT", "WITH")) and any(t in sql for t in BIG_TABLES):
            read += 1
            plan = plan_of(sql)
            if whole_history_reads(plan):
                found.append((sql, outline(plan)))
    assert read, "the pass read no big table: nothing was checked"
    return found


def test_the_completion_pass_reads_running_tasks_only():
    assert history_reads(lambda: lifecycle.tasks_complete_due(
        now=timezone.now(), default_seconds=60, nodes=[f"node-{i}" for i in range(64)])) == []


def test_the_timeout_pass_reads_alive_groups_only():
    assert history_reads(lambda: lifecycle.groups_time_out(now=timezone.now())) == []


def test_the_usage_sample_reads_held_tasks_only():
    assert history_reads(lambda: pool_services.usage_samples_record(
        now=timezone.now(), retention_hours=48)) == []


def test_retention_reads_no_history():
    assert history_reads(lambda: logstore.purge()) == []
