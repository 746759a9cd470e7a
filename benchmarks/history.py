"""A year of history (issue 49): every list as fast with N ended workflows as with twenty.

`osmo standalone` started as a user starts it (embedded cluster, tasks of a second), then

1. 20 workflows submitted through the REST API and run to their end (16 complete, 4 are
   canceled), with their groups, tasks, events and log chunks;
2. every request below timed against them: sequential calls, median of 30, each answer
   checked before a time is kept;
3. N more ended workflows cloned from those 20 with their rows, spread over the past year
   (`INSERT … SELECT` over `generate_series`, in batches), then `ANALYZE`;
4. the same requests timed again; each ratio printed, and the table sizes per row
   (`pg_total_relation_size`).

Exits non-zero when a median at N is above ``--bound`` × its median at 20, both divided by a
control request's (``/api/whoami``, which reads no history): on a shared machine the load of
the two phases differs, and the control measures by how much.

    python benchmarks/history.py [--workflows 1000000] [--bound 1.5] [--repeat 30]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import fail_on  # noqa: E402
from benchmarks.standalone import Standalone  # noqa: E402
from osmo.keyset import Position  # noqa: E402

TEMPLATES, CANCELED = 20, 4
POOL = "bench"
SPEC = """workflow:
  name: hist{index}
  tasks:
  - {{name: prep, image: ubuntu, command: [sleep, "{seconds}"], resource: cpu}}
  - {{name: main, image: ubuntu, command: [sleep, "{seconds}"], resource: cpu}}
  resources:
    cpu: {{gpu: 0, cpu: 1, memory: 1Gi}}
"""
YEAR_SECONDS = 365 * 24 * 3600
BATCH_WORKFLOWS = 100_000  # rows of one INSERT … SELECT: no statement runs for minutes
TABLES = ("workflows_workflow", "workflows_workflowgroup", "workflows_task",
          "workflows_taskevent", "workflows_tasklogchunk")


@dataclass(frozen=True)
class Request:
    label: str
    path: str
    params: dict
    check: Callable[[httpx.Response, dict], str | None]  # a problem, or None
    bounded: bool = True  # False: timed for comparison only (an OFFSET walks its rows)


def _json(response: httpx.Response) -> dict | list:
    return response.json() if response.headers.get("content-type", "").startswith(
        "application/json") else {}


def page_of(size: int, *, status: str | None = None, order: str = "DESC",
            total: str | None = None):
    """A workflow page of `size` rows, in submission order, all of `status` when given; its
    `count` the fact named `total` (half of it at least when flagged an estimate)."""
    def check(response, facts):
        body = _json(response)
        rows = body.get("results", [])
        if len(rows) != size:
            return f"{len(rows)} rows, not {size}"
        if status and any(row["status"] != status for row in rows):
            return f"a row not {status}"
        times = [row["submitted_at"] for row in rows]
        if times != sorted(times, reverse=order == "DESC"):
            return "rows out of order"
        if total and body["count"] < facts[total] * (0.5 if body["count_is_estimate"] else 1):
            return f"count {body['count']} for {facts[total]} workflows"
        return None
    return check


def task_page(size: int):
    def check(response, facts):
        rows = _json(response).get("tasks", [])
        return None if len(rows) == size else f"{len(rows)} tasks, not {size}"
    return check


def text_with(pattern: str):
    def check(response, facts):
        found = len(re.findall(pattern, response.text, re.M))
        return None if found else f"no line matching {pattern!r}"
    return check


def json_with(key: str | None):
    """An object with `key` not empty; None: a list not empty."""
    def check(response, facts):
        body = _json(response)
        found = body if key is None else body.get(key) if isinstance(body, dict) else None
        return None if found else f"no {key or 'rows'}"
    return check


def html_with(text: str):
    def check(response, facts):
        return None if text in response.text else f"the page lacks {text!r}"
    return check


CONTROL = "GET /api/whoami (control: reads no history)"
# `osmo task list` without `--status` (client 6.4.0).
CLIENT_TASK_STATUSES = ["PROCESSING", "SCHEDULING", "INITIALIZING", "RUNNING"]


def requests_of(facts: dict) -> list[Request]:
    newest = facts["newest"]
    return [
        Request(CONTROL, "/api/whoami", {}, lambda r, f: None),
        Request("GET /api/workflow (page of 20)", "/api/workflow", {"limit": 20},
                page_of(20, total="workflows")),
        Request("  ?pool=…&status=COMPLETED", "/api/workflow",
                {"pool": POOL, "status": "COMPLETED", "limit": 20},
                page_of(min(20, facts["completed"]), status="COMPLETED", total="completed")),
        Request("  ?users=bench", "/api/workflow", {"users": "bench", "limit": 20}, page_of(20)),
        Request("  ?name=hist1", "/api/workflow", {"name": "hist1", "limit": 20}, page_of(
            min(20, facts["named_hist1"]))),
        Request("  ?statuses=FAILED_CANCELED", "/api/workflow",
                {"statuses": "FAILED_CANCELED", "limit": 20},
                page_of(min(20, facts["canceled"]), status="FAILED_CANCELED")),
        Request("  ?submitted_before=…(oldest first)", "/api/workflow",
                {"submitted_before": facts["before"], "order": "ASC", "limit": 20},
                page_of(min(20, facts["older"]), order="ASC")),
        Request("  offset page 2", "/api/workflow", {"limit": 10, "offset": 10}, page_of(10)),
        Request("  cursor page at the middle of the history", "/api/workflow",
                {"limit": 10, "cursor": facts["middle_cursor"]},
                page_of(min(10, facts["workflows"] - facts["workflows"] // 2 - 1))),
        Request("  offset page at the middle of the history", "/api/workflow",
                {"limit": 10, "offset": facts["workflows"] // 2}, page_of(10), bounded=False),
        Request("task list -a (limit 20)", "/api/task", {"all_users": "true", "limit": 20},
                task_page(20)),
        Request("  order DESC", "/api/task", {"all_users": "true", "limit": 20,
                                              "order": "DESC"}, task_page(20)),
        Request("  statuses=COMPLETED&pools=bench", "/api/task",
                {"all_users": "true", "limit": 20, "statuses": "COMPLETED", "pools": POOL},
                task_page(20)),
        Request("  users=bench, offset 20", "/api/task",
                {"users": "bench", "limit": 20, "offset": 20}, task_page(20)),
        Request("  the client's default statuses (alive tasks)", "/api/task",
                {"users": "bench", "limit": 20, "statuses": CLIENT_TASK_STATUSES},
                lambda r, f: None if "tasks" in _json(r) else "no tasks key"),
        Request("  --summary, the client's default statuses", "/api/task",
                {"users": "bench", "summary": "true", "statuses": CLIENT_TASK_STATUSES},
                lambda r, f: None if "summaries" in _json(r) else "no summaries key"),
        Request("  cursor at the middle of the history", "/api/task",
                {"all_users": "true", "limit": 10, "cursor": facts["middle_task_cursor"]},
                task_page(10)),
        Request("  offset at the middle of the history", "/api/task",
                {"all_users": "true", "limit": 10, "offset": facts["tasks"] // 2},
                task_page(10), bounded=False),
        Request("one workflow", f"/api/workflow/{newest}", {}, json_with("groups")),
        Request("its events", f"/api/workflow/{newest}/events", {},
                text_with(r"Submitted")),
        Request("its logs", f"/api/workflow/{newest}/logs", {"follow": "false"},
                text_with(r"^\d{4}/\d\d/\d\d .*\[main\]")),
        Request("pool audit history", f"/api/configs/pool/{POOL}/history", {}, json_with(None)),
        Request("pool quota", "/api/pool_quota", {}, lambda r, f: None),
        Request("dashboard: workflows", "/workflows/", {}, html_with(newest)),
        Request("dashboard: the pool", f"/pools/{POOL}/", {}, html_with(POOL)),
    ]


def timed(http: httpx.Client, request: Request, facts: dict, repeat: int) -> float:
    """Median ms of `repeat` sequential calls, after 3 unmeasured; every answer checked."""
    took = []
    for index in range(repeat + 3):
        started = time.perf_counter()
        response = http.get(request.path, params=request.params)
        elapsed = (time.perf_counter() - started) * 1000
        problem = (f"HTTP {response.status_code}: {response.text[:200]}"
                   if response.status_code != 200 else request.check(response, facts))
        fail_on(request.label.strip(), [problem] if problem else [])
        if index >= 3:
            took.append(elapsed)
    return statistics.median(took)


def submit_templates(http: httpx.Client) -> list[str]:
    names = []
    for index in range(TEMPLATES):
        canceled = index < CANCELED
        response = http.post(f"/api/pool/{POOL}/workflow", json={"file": SPEC.format(
            index=index, seconds=600 if canceled else 1)})
        fail_on("submit", [] if response.status_code == 201 else [response.text[:300]])
        names.append(response.json()["name"])
        if canceled:
            cancel = http.post(f"/api/workflow/{names[-1]}/cancel")
            fail_on("cancel", [] if cancel.status_code == 200 else [cancel.text[:300]])
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        body = http.get("/api/workflow", params={"limit": 100}).json()
        alive = [w["name"] for w in body["results"] if w["status"] in ("PENDING", "RUNNING")]
        if not alive and body["count"] == TEMPLATES:
            return names
        time.sleep(0.5)
    raise SystemExit(f"[history] FAILED, no figure printed: still alive after 180 s: {alive}")


def cloned_columns(cursor, table: str, replaced: dict[str, str], alias: str) -> tuple[str, str]:
    """(the table's columns, the SELECT list copying them from `alias`, some replaced)."""
    cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                   "ORDER BY ordinal_position", [table])
    columns = [row[0] for row in cursor.fetchall()]
    kept = [c for c in columns if not (c == "id" and "id" not in replaced)]
    return (", ".join(kept), ", ".join(replaced.get(c, f"{alias}.{c}") for c in kept))


def clone_history(workflows: int, templates: list[str]) -> None:
    """`workflows` more ended workflows (rounded up to the 20), copies of the templates, each
    copy c of them older by c/copies of a year; ids given by arithmetic over the copy number,
    so groups, tasks, events and chunks find their copied parents without a lookup."""
    from django.db import connection

    copies = -(-workflows // TEMPLATES)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE tw AS SELECT id, row_number() OVER (ORDER BY id) - 1 "
                       "AS k FROM workflows_workflow WHERE name = ANY(%s)", [templates])
        cursor.execute("CREATE TEMP TABLE tg AS SELECT g.id, row_number() OVER (ORDER BY g.id)"
                       " - 1 AS gi, tw.k FROM workflows_workflowgroup g JOIN tw "
                       "ON tw.id = g.workflow_id")
        cursor.execute("CREATE TEMP TABLE tt AS SELECT t.id, row_number() OVER (ORDER BY t.id)"
                       " - 1 AS ti, tg.gi, tg.k FROM workflows_task t JOIN tg "
                       "ON tg.id = t.group_id")
        counts = {}
        for table in ("tw", "tg", "tt"):
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts[table] = cursor.fetchone()[0]
        bases = {}
        for table in ("workflows_workflow", "workflows_workflowgroup", "workflows_task"):
            cursor.execute(f"SELECT max(id) + 1 FROM {table}")
            bases[table] = cursor.fetchone()[0]
        w = f"({bases['workflows_workflow']} + (c - 1) * {counts['tw']} + x.k)"
        g = f"({bases['workflows_workflowgroup']} + (c - 1) * {counts['tg']} + x.gi)"
        t = f"({bases['workflows_task']} + (c - 1) * {counts['tt']} + x.ti)"
        shift = f"make_interval(secs => c * {YEAR_SECONDS}.0 / {copies})"
        ended = {col: f"o.{col} - {shift}" for col in ("submitted_at", "started_at",
                                                       "finished_at")}
        plans = [
            ("workflows_workflow", "tw", {"id": w, "name": "o.name || '-h' || c", **ended}),
            ("workflows_workflowgroup", "tg",
             {"id": g, "workflow_id": w, "scheduling_at": f"o.scheduling_at - {shift}",
              "below_min_since": "NULL", **ended}),
            ("workflows_task", "tt", {"id": t, "group_id": g, "workflow_id": w, **ended}),
        ]
        started = time.perf_counter()
        step = max(1, BATCH_WORKFLOWS // TEMPLATES)
        for first in range(1, copies + 1, step):
            last = min(copies, first + step - 1)
            series = f"generate_series({first}, {last}) AS c"
            for table, template, replaced in plans:
                columns, select = cloned_columns(cursor, table, replaced, "o")
                cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {select} FROM {series} "
                               f"CROSS JOIN {template} x JOIN {table} o ON o.id = x.id")
            # events and chunks: their task (or none) and workflow, through the templates
            for table, replaced in (
                ("workflows_taskevent", {"at": f"o.at - {shift}"}),
                ("workflows_tasklogchunk", {})):
                columns, select = cloned_columns(
                    cursor, table, {"workflow_id": w.replace("x.k", "tw.k"),
                                    "task_id": f"CASE WHEN o.task_id IS NULL THEN NULL ELSE "
                                               f"{t} END", **replaced}, "o")
                cursor.execute(
                    f"INSERT INTO {table} ({columns}) SELECT {select} FROM {series} CROSS JOIN "
                    f"{table} o JOIN tw ON tw.id = o.workflow_id LEFT JOIN tt x "
                    f"ON x.id = o.task_id")
            print(f"  cloned {last * TEMPLATES:,} workflows "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        for table in ("workflows_workflow", "workflows_workflowgroup", "workflows_task"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                           f"(SELECT max(id) FROM {table}))")
        for table in TABLES:
            cursor.execute(f"ANALYZE {table}")
        print(f"  ANALYZE done ({time.perf_counter() - started:.0f} s)", flush=True)
    connection.close()


def table_sizes() -> dict[str, tuple[int, int, int]]:
    """table → (rows, bytes with its indexes and TOAST, log lines for the chunks)."""
    from django.db import connection

    sizes = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            lines = ", sum(lines)" if table == "workflows_tasklogchunk" else ", 0"
            cursor.execute(f"SELECT count(*){lines}, pg_total_relation_size('{table}') "
                           f"FROM {table}")
            rows, line_count, size = cursor.fetchone()
            sizes[table] = (rows, size, line_count or 0)
    connection.close()
    return sizes


def add_nodes(count: int) -> None:
    """The embedded cluster's nodes (a standalone without its demo has none)."""
    from django.db import connections

    from scheduler.models import Node

    Node.objects.bulk_create(
        Node(name=f"node-{i}", gpus=8, cpu_millis=128_000, memory_bytes=1024**4,
             labels={"kubernetes.io/hostname": f"node-{i}"}) for i in range(count))
    connections.close_all()


def facts_now(http: httpx.Client, names: list[str]) -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED'), "
                       "count(*) FILTER (WHERE status = 'FAILED_CANCELED'), "
                       "count(*) FILTER (WHERE name ILIKE '%%hist1%%'), "
                       "percentile_disc(0.5) WITHIN GROUP (ORDER BY submitted_at) "
                       "FROM workflows_workflow")
        total, completed, canceled, named, middle = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM workflows_workflow WHERE submitted_at < %s",
                       [middle])
        older = cursor.fetchone()[0]
        # The rows a cursor deep in the history names: the middle workflow, newest first, and
        # the middle task, by start time (the client's order).
        cursor.execute("SELECT submitted_at, id FROM workflows_workflow ORDER BY submitted_at "
                       "DESC, id DESC OFFSET %s LIMIT 1", [total // 2])
        workflow_at = Position(True, True, *cursor.fetchone()).encode()
        cursor.execute("SELECT count(*) FROM workflows_task")
        tasks = cursor.fetchone()[0]
        cursor.execute("SELECT started_at, id FROM workflows_task ORDER BY started_at ASC "
                       "NULLS LAST, id OFFSET %s LIMIT 1", [tasks // 2])
        task_at = Position(False, True, *cursor.fetchone()).encode()
    connection.close()
    newest = http.get("/api/workflow", params={"limit": 1}).json()["results"][0]["name"]
    return {"workflows": total, "completed": completed, "canceled": canceled,
            "named_hist1": named, "older": older, "before": middle.isoformat(), "newest": newest,
            "tasks": tasks, "middle_cursor": workflow_at, "middle_task_cursor": task_at}


def log_slow_statements(ms: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER SYSTEM SET log_min_duration_statement = {int(ms)}")
        cursor.execute("SELECT pg_reload_conf()")
    connection.close()


def slow_statements(log: Path, top: int = 15) -> list[tuple[float, str]]:
    """The slowest statements the server logged, each once (its longest time)."""
    found: dict[str, float] = {}
    for duration, statement in re.findall(r"duration: ([\d.]+) ms\s+(?:statement|execute "
                                          r"[^:]*): (.*)", log.read_text(errors="replace")):
        key = statement[:400]
        found[key] = max(found.get(key, 0.0), float(duration))
    return sorted(((d, s) for s, d in found.items()), reverse=True)[:top]


def dashboard_session(base: str, token: str) -> httpx.Client:
    """A browser's session: the dashboard's sign-in with the token."""
    client = httpx.Client(base_url=base, timeout=120)
    page = client.get("/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    fail_on("dashboard sign-in", [] if csrf else ["no CSRF field on /login/"])
    signed = client.post("/login/token/", data={"token": token, "csrfmiddlewaretoken": csrf[1]},
                         headers={"Referer": f"{base}/login/"})
    fail_on("dashboard sign-in", [] if signed.status_code in (200, 302) and
            "sessionid" in client.cookies else [f"HTTP {signed.status_code}"])
    return client


def measure(api: httpx.Client, browser: httpx.Client, facts: dict,
            repeat: int) -> dict[str, float]:
    return {request.label: timed(browser if not request.path.startswith("/api/") else api,
                                 request, facts, repeat) for request in requests_of(facts)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=1_000_000)
    parser.add_argument("--bound", type=float, default=1.5)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--slow-ms", type=int, default=0,
                        help="print the statements slower than this at N (0: none)")
    args = parser.parse_args()

    run_dir = Path(tempfile.mkdtemp(prefix="osmo-history-bench-"))
    standalone = Standalone(run_dir / "osmo", {"OSMO_SIM_TASK_SECONDS": "1",
                                               "OSMO_SIM_LOG_INTERVAL": "1",
                                               "OSMO_LOG_LEVEL": "WARNING"})
    try:
        standalone.start()
        standalone.join_database()
        token = standalone.bench_token(POOL, 1000)
        add_nodes(4)
        api = httpx.Client(base_url=standalone.base, timeout=120,
                           headers={"Authorization": f"Bearer {token}"})
        names = submit_templates(api)
        browser = dashboard_session(standalone.base, token)
        small_facts = facts_now(api, names)
        small = measure(api, browser, small_facts, args.repeat)
        sizes_small = table_sizes()
        started = time.perf_counter()
        clone_history(args.workflows, names)
        fill_s = time.perf_counter() - started
        large_facts = facts_now(api, names)
        if args.slow_ms:
            log_slow_statements(args.slow_ms)
        large = measure(api, browser, large_facts, args.repeat)
        slow = slow_statements(standalone.data_dir / "pg" / "log") if args.slow_ms else []
        sizes_large = table_sizes()
    finally:
        standalone.stop()
        shutil.rmtree(run_dir, ignore_errors=True)

    n = large_facts["workflows"]
    print(f"history of {n:,} workflows built in {fill_s:.0f} s; sequential calls, median of "
          f"{args.repeat}")
    # The machine is shared: the control's ratio is what the load alone changed between the
    # two phases; each request's ratio is also given divided by it.
    load = large[CONTROL] / small[CONTROL]
    print(f"| request | {small_facts['workflows']} workflows | {n:,} workflows | ratio | "
          f"ratio / control's |")
    print("|---|---|---|---|---|")
    over = []
    unbounded = {r.label for r in requests_of(large_facts) if not r.bounded}
    for label, before in small.items():
        ratio = large[label] / before
        note = " (not bound: its OFFSET walks the rows before it)" if label in unbounded else ""
        print(f"| {label.strip()}{note} | {before:.1f} ms | {large[label]:.1f} ms | "
              f"× {ratio:.2f} | × {ratio / load:.2f} |")
        if ratio / load > args.bound and label not in unbounded:
            over.append(f"{label.strip()} × {ratio / load:.2f}")
    added = {table: (sizes_large[t][0] - sizes_small[t][0], sizes_large[t][1] -
                     sizes_small[t][1], sizes_large[t][2] - sizes_small[t][2])
             for t, table in ((t, t) for t in TABLES)}
    workflows_added = added["workflows_workflow"][0]
    print("growth (pg_total_relation_size, tables with their indexes):")
    for table, (rows, size, lines) in added.items():
        per_line = f", {size / lines:.0f} B a log line" if lines else ""
        print(f"  {table}: {rows / workflows_added:.1f} rows and {size / workflows_added:.0f} B "
              f"a workflow, {size / max(rows, 1):.0f} B a row{per_line}")
    for duration, statement in slow:
        print(f"slow statement at N: {duration:.0f} ms {statement}")
    print(f"every ratio (divided by the control's) ≤ {args.bound}: "
          + ("yes" if not over else "NO: " + ", ".join(over)))
    if over:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
