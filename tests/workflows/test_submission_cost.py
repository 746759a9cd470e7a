"""A submission is a few statements: the token with its user's roles, the pool family's lock,
and one insert that writes the workflow's rows and its first events. Inside a caller's
transaction (as in these tests) that insert also numbers the workflow, so the name counter's
row, which every submission of the same spec name then waits for until its holder commits, is
held for that one statement and the commit; on its own a submission takes its number on the
numbering connection instead (tests/workflows/test_numbering.py)."""

from __future__ import annotations

import datetime as dt
import warnings

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from pools.models import Pool
from scheduler.core.kai_names import podgroup_name
from scheduler.core.model import Gang
from scheduler.core.model import Pod as CorePod
from scheduler.core.readiness import InvalidGang, build_tree, minimum_gpus
from tests.conftest import make_client
from workflows import admission, insert
from workflows.models import Task, TaskEvent, Workflow, WorkflowGroup, WorkflowNameCounter

from .conftest import gpu_spec, submit

pytestmark = pytest.mark.django_db


def test_a_submission_is_three_statements_and_its_savepoint(team) -> None:
    alice = make_client("alice", "osmo-team-user")
    assert submit(alice, "team", gpu_spec(1, "same")).status_code == 201  # the pool read
    with CaptureQueriesContext(connection) as queries:
        response = submit(alice, "team", gpu_spec(1, "same"))
    assert response.status_code == 201, response.json()
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 5, statements  # token, SAVEPOINT, lock, insert, RELEASE
    counter = [s for s in statements if "workflows_workflownamecounter" in s]
    assert len(counter) == 1 and "INSERT INTO workflows_workflow " in counter[0]
    body = response.json()
    assert body["name"] == "same-2"
    group = WorkflowGroup.objects.get(workflow__name="same-2")
    assert group.podgroup == podgroup_name("same-2", group.name)
    assert list(TaskEvent.objects.filter(workflow__name="same-2").order_by("id").values_list(
        "reason", flat=True)) == ["Submitted", "Admitted"]
    assert WorkflowNameCounter.objects.get(spec_name="same").value == 2


def test_a_name_too_long_for_a_plain_podgroup_name_is_numbered_first(team) -> None:
    alice = make_client("alice", "osmo-team-user")
    long = "a" * 55  # with its number and group, longer than a DNS label: hashed
    for number in (1, 2):
        response = submit(alice, "team", gpu_spec(1, long))
        assert response.status_code == 201, response.json()
        name = f"{long}-{number}"
        assert response.json()["name"] == name
        group = WorkflowGroup.objects.get(workflow__name=name)
        assert group.podgroup == podgroup_name(name, group.name) != f"{name}-{group.name}"
    assert Workflow.objects.count() == 2


def test_the_insert_is_one_statement_text_psycopg_converts_once(team) -> None:
    """psycopg re-parses, on every call, a statement longer than its cache's limit or with
    more parameters: the insert sends groups, tasks and events as JSON, so its text and its
    parameter count stay the same whatever the workflow's size, within those limits."""
    from psycopg import _queries

    from workflows import insert

    alice = make_client("alice", "osmo-team-user")
    groups = "".join(f"""
  - name: g{i}
    tasks:
    - {{name: t{i}a, image: ubuntu, command: [sleep, "1"], resource: gpu, lead: true}}
    - {{name: t{i}b, image: ubuntu, command: [sleep, "1"], resource: gpu, replicas: 2}}"""
                     for i in range(3))
    three_groups = f"""
workflow:
  name: sizes
  groups:{groups}
  resources:
    gpu: {{gpu: 1, cpu: 1, memory: 1Gi}}
"""
    sent = []

    def record(execute, sql, params, many, context):
        if "workflows_task " in sql:
            sent.append((sql, len(params)))
        return execute(sql, params, many, context)

    for spec, sizes in ((gpu_spec(1, "sizes"), [1]), (three_groups, [3, 3, 3])):
        with connection.execute_wrapper(record):
            response = submit(alice, "team", spec)
        assert response.status_code == 201, response.json()
        assert [len(group["tasks"]) for group in response.json()["groups"]] == sizes
    assert len(sent) == 2 and sent[0] == sent[1], sent
    for events in (False, True):
        for numbered in (False, True):
            statement = insert._statement(events, numbered)
            assert len(statement.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH
            assert statement.count("%s") <= _queries.MAX_CACHED_STATEMENT_PARAMS
    assert sent[0][0] == insert._statement(True, True)


def test_the_locked_read_loads_a_pool_and_its_parent_as_the_orm_does(team) -> None:
    from django.db import transaction

    from pools.models import Pool
    from tests import factories
    from workflows.admission import _locked_target

    factories.subpool(team, "a", 10)

    def fields(pool: Pool) -> dict:
        return {f.attname: getattr(pool, f.attname) for f in Pool._meta.concrete_fields}

    with transaction.atomic():
        top, sub = _locked_target("team"), _locked_target("team--a")
    assert fields(top) == fields(Pool.objects.get(name="team"))
    assert top.platforms["dgx-h100"]["node_selector"] == {"nvidia.com/gpu.product": "H100"}
    assert fields(sub) == fields(Pool.objects.get(name="team--a"))
    assert fields(sub.parent) == fields(top) and not top._state.adding


def test_a_connections_hot_statements_are_prepared_on_the_server(team) -> None:
    """From their third execution on a connection, a request's token lookup, a submission's
    pool lock and its insert run as statements prepared on the server: parsed and planned once,
    not at every call."""
    alice = make_client("alice", "osmo-team-user")

    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return [row[0] for row in cursor.fetchall()]

    for _ in (1, 2):
        assert submit(alice, "team", gpu_spec(1, "hot")).status_code == 201
    assert not [s for s in prepared() if "workflows_workflow" in s]
    assert submit(alice, "team", gpu_spec(1, "hot")).status_code == 201
    statements = prepared()
    assert any(s.lstrip().startswith("WITH counter AS") and "workflows_workflow" in s
               for s in statements), statements
    assert any("accounts_accesstoken" in s and "t.digest = $" in s for s in statements)
    assert any('FROM "pools"' in s or "FROM pools" in s for s in statements), statements
    assert Workflow.objects.filter(name__startswith="hot-").count() == 3


def test_the_insert_sends_each_value_as_djangos_preparation_does(team) -> None:
    """Values of the types a column takes as they are skip Django's preparation; any other
    value (a subclass, a naive time, a bool for an integer, a float) still takes it, so every
    column gets what Django would send: an integer too large for its column too (sent as a
    plain int, which the server refuses as out of range)."""

    class Name(str):
        pass

    class Count(int):
        pass

    pool = Pool.objects.get(name="team")
    aware = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
    naive = dt.datetime(2026, 11, 27, 12, 0)
    workflow = Workflow(name=Name("w"), kind="workflow", pool=pool, priority="NORMAL",
                        status="PENDING", spec="s", gpus_requested=Count(3),
                        exec_timeout_seconds=True, queue_timeout_seconds=None,
                        labels={"a": "b"}, submitted_at=aware)
    group = WorkflowGroup(workflow=workflow, name="g", position=0, status="SCHEDULING",
                          podgroup="p", gpus=2.0, gang={"min": 1}, scheduling_at=naive)
    task = Task(group=group, workflow=workflow, pool=pool, priority="LOW", name="t",
                spec_task="t", replica=None, position=Count(1), status="SCHEDULING", gpus=2**40,
                cpu_millis=10**12, memory_bytes=2**40, node_selector={}, run_seconds=7,
                started_at=aware)
    db = connections["default"]

    def plain(field, value):
        if getattr(field, "auto_now_add", False):  # the time of the call: its type only
            return "now", type(value), value.tzinfo
        return ("Jsonb", value.obj) if isinstance(value, Jsonb) else (type(value), value)

    def expected_warnings(instance):  # the naive time's, else none at all
        return (pytest.warns(RuntimeWarning) if instance is group
                else warnings.catch_warnings(action="error"))

    for instance, model in ((workflow, Workflow), (group, WorkflowGroup), (task, Task)):
        fields = insert._fields(model)[0]
        with expected_warnings(instance):
            sent = [plain(f, value) for f, value in insert._prepared(instance, model, db)]
        with expected_warnings(instance):
            django = [plain(f, f.get_db_prep_save(f.pre_save(instance, add=True), db))
                      for f in fields]
        assert sent == django, model


@given(gpus=st.lists(st.integers(0, 8), min_size=1, max_size=12),
       min_member=st.one_of(st.none(), st.integers(1, 14)),
       topology=st.booleans())
@hypothesis_settings(max_examples=200, deadline=None)
def test_a_plain_gangs_minimum_needs_no_tree(gpus, min_member, topology) -> None:
    # Admission sums the GPUs of a gang that needs every pod without building its tree; the
    # tree's answer is the same (an unset minMember is 1, as in KAI).
    fields = {"minMember": min_member} if min_member is not None else {}
    if topology:
        fields["topologyConstraint"] = {"requiredTopologyLevel": "rack"}
    pods = [(f"p-{i}", None, g) for i, g in enumerate(gpus)]
    core = Gang("g", "q", min_member=min_member,
                pods=tuple(CorePod(name, gpus=g) for name, _subgroup, g in pods))
    try:
        expected = minimum_gpus(build_tree(core))
    except InvalidGang:
        expected = sum(gpus)
    assert admission._minimum_gpus(fields, pods) == expected
