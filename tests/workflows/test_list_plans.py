"""The list pages read an index, not the whole history: with a few thousand ended workflows
and ANALYZE, page 1 of each list has no Seq Scan and no de-duplication over the big tables,
and the count reads at most COUNT_BOUND + 1 rows."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from osmo.pagination import COUNT_BOUND
from tests import factories
from tests.conftest import make_client
from workflows.models import Task, TaskStatus, Workflow, WorkflowGroup, WorkflowStatus

pytestmark = pytest.mark.django_db

HISTORY = 4000
POOLS = 20
BIG_TABLES = {Workflow._meta.db_table, WorkflowGroup._meta.db_table, Task._meta.db_table}


@pytest.fixture
def history(db):
    """HISTORY ended workflows (one group, one task each) over POOLS pools, one a minute."""
    pools = [factories.pool(name, 10) for name in ["team", *(f"p{i}" for i in range(1, POOLS))]]
    owner = make_client("owner", "osmo-team-user").user
    now = timezone.now()
    workflows = Workflow.objects.bulk_create(
        Workflow(name=f"old-{i}", pool=pools[i % POOLS], user=owner,
                 status=WorkflowStatus.COMPLETED if i % 3 else WorkflowStatus.FAILED)
        for i in range(HISTORY))
    groups = WorkflowGroup.objects.bulk_create(
        WorkflowGroup(workflow=w, name="main", status=TaskStatus.COMPLETED) for w in workflows)
    Task.objects.bulk_create(
        Task(group=g, workflow=w, pool=w.pool, priority="NORMAL", name="main",
             status=TaskStatus.COMPLETED, started_at=now - timedelta(minutes=i))
        for i, (w, g) in enumerate(zip(workflows, groups, strict=True)))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Workflow._meta.db_table} SET submitted_at = %s - id * "
                       "interval '1 minute'", [now])
        for table in BIG_TABLES:
            cursor.execute(f"ANALYZE {table}")
    return pools


def plan_of(sql: str, probe: bool = False) -> dict:
    """``probe``: plan with Seq Scans priced out, so the plan shows whether an index serves it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL enable_seqscan = {'off' if probe else 'on'}")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def outline(plan: dict, depth: int = 0) -> str:
    line = "  " * depth + f"{plan['Node Type']} {plan.get('Relation Name', '')} " \
        f"{plan.get('Index Name', '')} {plan.get('Index Cond', '')} {plan.get('Filter', '')}"
    return "\n".join([line, *(outline(c, depth + 1) for c in plan.get("Plans", ()))])


def whole_history_reads(plan: dict) -> list[str]:
    """Seq Scans of the big tables, and Unique / hashed aggregates anywhere above them."""
    found = []
    for node in nodes(plan):
        below = {n.get("Relation Name") for n in nodes(node)} & BIG_TABLES
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in BIG_TABLES:
            found.append(f"Seq Scan on {node['Relation Name']}")
        if below and (node["Node Type"] == "Unique" or node.get("Strategy") == "Hashed"
                      and node["Node Type"] == "Aggregate"):
            found.append(f"{node['Node Type']} over {sorted(below)}")
    return found


def page_queries(client, path: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200, response.content
    return [q["sql"] for q in queries.captured_queries
            if q["sql"].startswith("SELECT") and any(t in q["sql"] for t in BIG_TABLES)]


def check_page(client, path: str) -> None:
    sqls = page_queries(client, path)
    assert sqls
    for sql in sqls:
        # A page's groups or tasks read by its workflows' ids: at this test's size the planner
        # may price reading a few thousand rows whole below 20 probes (it did, once, in a fresh
        # database), at production size never; what must hold is that an index serves the probe.
        plan = plan_of(sql, probe='"workflow_id" IN (' in sql)
        if "COUNT(" in sql:  # bounded: a Limit of COUNT_BOUND + 1 under the count
            limits = [n for n in nodes(plan) if n["Node Type"] == "Limit"]
            assert limits and f"LIMIT {COUNT_BOUND + 1}" in sql, sql
            continue
        assert whole_history_reads(plan) == [], (path, sql, outline(plan))


@pytest.mark.parametrize("who", ["admin", "pool user"])
def test_list_pages_read_an_index(history, who):
    client = (make_client("platform-admin", "osmo-admin") if who == "admin"
              else make_client("viewer", "osmo-team-user"))
    check_page(client, "/api/workflow?limit=20")
    check_page(client, "/api/workflow?pool=team&status=COMPLETED&limit=20")
    check_page(client, "/api/workflow?pools=team&statuses=COMPLETED&statuses=FAILED&limit=20")
    check_page(client, "/api/task?all_users=true&limit=20")
    check_page(client, "/api/task?all_users=true&limit=20&order=DESC")


def test_page_and_count_stay_exact_below_the_bound(history):
    viewer = make_client("viewer", "osmo-team-user")
    body = viewer.get("/api/workflow?pool=team&status=COMPLETED&limit=5").json()
    expected = Workflow.objects.filter(pool__name="team", status="COMPLETED")
    assert (body["count"], body["count_is_estimate"]) == (expected.count(), False)
    assert [w["name"] for w in body["results"]] == list(
        expected.order_by("-submitted_at", "-id").values_list("name", flat=True)[:5])
    tasks = viewer.get("/api/task?all_users=true&limit=3").json()["tasks"]
    assert [t["workflow_id"] for t in tasks] == list(
        Task.objects.filter(pool__name="team").order_by("started_at", "id")
        .values_list("workflow__name", flat=True)[:3])


def test_count_above_the_bound_is_an_estimate(history, monkeypatch):
    monkeypatch.setattr("osmo.pagination.COUNT_BOUND", 100)
    admin = make_client("platform-admin", "osmo-admin")
    body = admin.get("/api/workflow?limit=10").json()
    assert body["count_is_estimate"] is True
    assert body["count"] > 100 and abs(body["count"] - HISTORY) < HISTORY / 2
    assert body["next"] and len(body["results"]) == 10
    last = admin.get(f"/api/workflow?limit=10&offset={HISTORY - 5}").json()
    assert (len(last["results"]), last["next"], last["count"] >= HISTORY) == (5, None, True)
    small = admin.get("/api/workflow?pool=team&status=FAILED").json()
    assert (small["count"], small["count_is_estimate"]) == (
        Workflow.objects.filter(pool__name="team", status="FAILED").count(), False)


@pytest.mark.parametrize("who", ["admin", "pool user"])
@pytest.mark.parametrize("filters", ["", "&pool=team&status=COMPLETED", "&order=ASC"])
def test_a_deep_cursor_page_reads_the_index_from_its_position(history, who, filters):
    """The cursor a deep page links to: its page and the row read past each end start their
    index scan at the position (the row comparison is the Index Cond), with no OFFSET
    walking the rows before it."""
    client = (make_client("platform-admin", "osmo-admin") if who == "admin"
              else make_client("viewer", "osmo-team-user"))
    deep = client.get(f"/api/workflow?limit=20&offset=100{filters}").json()
    for link in (deep["next"], deep["previous"]):
        assert "cursor=" in link and "offset=" not in link
        check_page(client, link)
        sqls = page_queries(client, link)
        assert not [sql for sql in sqls if " OFFSET " in sql], sqls
        page = [sql for sql in sqls if "LIMIT 21" in sql]
        assert len(page) == 1
        plan = plan_of(page[0])
        starts = [n for n in nodes(plan) if "ROW(submitted_at, id)" in n.get("Index Cond", "")]
        assert starts and {n["Index Name"] for n in starts} <= {
            "workflow_submitted", "workflow_pool_status_submitted"}, outline(plan)


@pytest.mark.parametrize("who", ["admin", "pool user"])
@pytest.mark.parametrize("order", ["ASC", "DESC"])
def test_a_deep_task_cursor_page_reads_the_index_from_its_position(history, who, order):
    client = (make_client("platform-admin", "osmo-admin") if who == "admin"
              else make_client("viewer", "osmo-team-user"))
    query = f"/api/task?all_users=true&limit=20&order={order}"
    cursor = client.get(f"{query}&offset=100").json()["next_cursor"]
    path = f"{query}&cursor={cursor}"
    check_page(client, path)
    sqls = page_queries(client, path)
    assert not [sql for sql in sqls if " OFFSET " in sql], sqls
    page = [sql for sql in sqls if f'FROM "{Task._meta.db_table}"' in sql]
    assert len(page) == 1, sqls  # its workflows are then read by id
    plan = plan_of(page[0])
    starts = [n for n in nodes(plan) if "started_at" in n.get("Index Cond", "")]
    assert starts and {n["Index Name"] for n in starts} <= {
        "task_started", "task_started_desc"}, outline(plan)


def test_a_page_reads_its_groups_and_tasks_by_their_workflow_index(history):
    """A page's groups and tasks: one query each, by the index on their parent. The page is
    2.5 % of this history (the client's 1,000-row batch is 0.1 % of a million; a share as big
    as a quarter is rightly a scan, and only in a small history). As in `check_page`, the plan
    is made with Seq Scans priced out: at this test's size a whole read can price below the
    probes (it did, once, in a fresh database); what must hold is that the index serves them."""
    admin = make_client("platform-admin", "osmo-admin")
    sqls = page_queries(admin, f"/api/workflow?limit={HISTORY // 40}")
    related = {table: [sql for sql in sqls if f'FROM "{table}"' in sql]
               for table in (WorkflowGroup._meta.db_table, Task._meta.db_table)}
    assert [len(found) for found in related.values()] == [1, 1], sqls
    for (found,) in related.values():
        plan = plan_of(found, probe=True)
        assert whole_history_reads(plan) == [], outline(plan)
        indexes = {n["Index Name"] for n in nodes(plan) if "Index Name" in n}
        assert indexes and indexes <= {"group_unique_per_workflow", "task_unique_per_group"}, \
            outline(plan)


@pytest.mark.parametrize("who", ["admin", "pool user"])
def test_a_rare_name_search_reads_the_trigram_index(history, who):
    """`?name=` matching a few workflows of the history: the trigram index finds them, no
    scan of every name; the page is exactly the matching workflows."""
    client = (make_client("platform-admin", "osmo-admin") if who == "admin"
              else make_client("viewer", "osmo-team-user"))
    path = "/api/workflow?name=620&limit=20"  # old-620, old-1620, old-2620, old-3620: pool team
    check_page(client, path)
    page = [sql for sql in page_queries(client, path) if "LIMIT 21" in sql]
    assert len(page) == 1
    indexes = {n.get("Index Name") for n in nodes(plan_of(page[0]))}
    assert "workflow_name_trgm" in indexes, outline(plan_of(page[0]))
    names = [w["name"] for w in client.get(path).json()["results"]]
    visible = Workflow.objects.filter(name__contains="620")
    if who != "admin":
        visible = visible.filter(pool__name="team")
    assert sorted(names) == sorted(visible.values_list("name", flat=True))
    assert names


CLIENT_TASK_STATUSES = "&".join(f"statuses={s}" for s in (
    "PROCESSING", "SCHEDULING", "INITIALIZING", "RUNNING"))  # `osmo task list`'s default


@pytest.mark.parametrize("view", ["order=ASC", "order=DESC", "summary=true",
                                  "aggregate_by_workflow=true"])
def test_the_clients_default_task_list_reads_only_the_alive_tasks(history, view):
    """`osmo task list` and `--summary` without `--status`: the alive tasks' partial index,
    however many ended tasks the history holds; the answer is exactly the alive tasks."""
    alive = list(Task.objects.order_by("-started_at")[:30].values_list("pk", flat=True))
    Task.objects.filter(pk__in=alive[:25]).update(status=TaskStatus.RUNNING)
    Task.objects.filter(pk__in=alive[25:]).update(status=TaskStatus.SCHEDULING)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Task._meta.db_table}")
    admin = make_client("platform-admin", "osmo-admin")
    path = f"/api/task?all_users=true&limit=100&{CLIENT_TASK_STATUSES}&{view}"
    sqls = page_queries(admin, path)
    tasks = [sql for sql in sqls if f'FROM "{Task._meta.db_table}"' in sql]
    assert len(tasks) == 1
    plan = plan_of(tasks[0])
    assert [n for n in nodes(plan) if n.get("Index Name") == "task_alive_started"], outline(plan)
    # The summaries join the tasks' workflows and users (a small history's planner may
    # hash-join those); the page reads them by id after it.
    summary = "summary" in view or "aggregate" in view
    for sql in tasks if summary else sqls:
        scanned = {n.get("Relation Name") for n in nodes(plan_of(sql))
                   if n["Node Type"] == "Seq Scan"}
        assert not scanned & ({Task._meta.db_table} if summary else BIG_TABLES), sql
    body = admin.get(path).json()
    if "summary" in view or "aggregate" in view:
        assert sum(row["gpu"] for row in body["summaries"]) == sum(
            Task.objects.filter(pk__in=alive).values_list("gpus", flat=True))
        groups = Task.objects.filter(pk__in=alive).values_list(
            "pool", *(["workflow"] if "aggregate" in view else [])).distinct().count()
        assert len(body["summaries"]) == groups
    else:
        assert sorted(t["workflow_id"] for t in body["tasks"]) == sorted(
            Task.objects.filter(pk__in=alive).values_list("workflow__name", flat=True))
