"""`osmo workflow submit|list|query|explain|cancel|logs|events`."""

from __future__ import annotations

import argparse
from pathlib import Path

from .client import segment
from .common import add_format_option, connect, emit
from .errors import usage_error
from .localfiles import inline_local_files
from .output import dash, table

PRIORITIES = ("HIGH", "NORMAL", "LOW")
STATUSES = ("PENDING", "RUNNING", "COMPLETED", "FAILED", "FAILED_CANCELED", "FAILED_PREEMPTED",
            "FAILED_EVICTED", "FAILED_BACKEND_ERROR", "FAILED_SUBMISSION", "FAILED_EXEC_TIMEOUT",
            "FAILED_QUEUE_TIMEOUT")


def read_spec(path: str) -> str:
    """The spec with its `localpath:` files inlined, read relative to the spec's folder (the
    server never reads a client's files)."""
    spec_path = Path(path)
    try:
        text = spec_path.read_text()
    except OSError as error:
        raise usage_error(f"cannot read {path}: {error.strerror or error}") from error
    folder = spec_path.parent

    def read_local(name: str) -> str:
        local = Path(name).expanduser()
        local = local if local.is_absolute() else folder / local
        try:
            return local.read_text()
        except OSError as error:
            raise usage_error(f"cannot read {local} (a localpath in {path}): "
                              f"{error.strerror or error}") from error

    return inline_local_files(text, read_local)


def key_value(value: str) -> str:
    key, sep, _ = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"'{value}' is not key=value")
    return value


def _summary(workflow: dict) -> str:
    return (f"{workflow['name']} in pool {workflow['pool']} at {workflow['priority']} priority, "
            f"{workflow['gpus_requested']} GPUs")


def submit(args) -> int:
    body = {"file": read_spec(args.file), "set_variables": args.set or [],
            "set_string_variables": args.set_string or []}
    params = {"dry_run": "true" if args.dry_run else "false"}
    if args.priority:
        params["priority"] = args.priority
    with connect(args) as api:
        pool = args.pool or api.get("api/profile/settings")["profile"].get("pool")
        if not pool:
            raise usage_error("no --pool given and no default pool set: pass --pool NAME, "
                              "or set one with `osmo pool default NAME` (`osmo pool list` "
                              "shows the pools)")
        _, answer = api.request("POST", f"api/pool/{segment(pool)}/workflow",
                                params=params, json=body)
    if args.dry_run:
        manifests = answer.get("manifests", [])
        lines = [f"Dry run: {_summary(answer['workflow'])}, would be admitted.",
                 f"{len(manifests)} manifest(s):"]
        lines += [f"  {m.get('kind')} {m.get('metadata', {}).get('name')}" for m in manifests]
        text = "\n".join(lines) + "\n"
    else:
        text = f"Submitted {_summary(answer)}: {answer['status']}\n"
    emit(args, answer, text)
    return 0


def list_workflows(args) -> int:
    with connect(args) as api:
        page = api.get("api/workflow", pool=args.pool, status=args.status, user=args.user,
                       limit=args.limit)
    rows = [[w["name"], w["pool"], w["priority"], w["status"], dash(w["reason"]),
             w["gpus_requested"], dash(w["user"]), dash(w["submitted_at"])]
            for w in page["results"]]
    text = table(("Name", "Pool", "Priority", "Status", "Reason", "GPUs", "User", "Submitted"),
                 rows)
    if not page["count"]:
        filtered = args.pool or args.status or args.user
        text = ("No workflow visible to you matches these filters.\n" if filtered
                else "No workflow is visible to you yet.\n")
    elif page["count"] > len(rows):
        text += f"({len(rows)} of {page['count']}; use --limit to see more)\n"
    emit(args, page, text)
    return 0


def pending_reason(explanation: dict | None) -> str | None:
    """The first reason a still-pending group gives (what `explain` says, in one line)."""
    for group in (explanation or {}).get("groups", []):
        if group["status"] in ("WAITING", "SCHEDULING") and group["reasons"]:
            return f"{group['name']}: {group['reasons'][0]['message']}"
    return None


def expected_start(explanation: dict | None) -> str | None:
    """When the first group holding a reservation is expected to start (or that no estimate
    exists), in one line."""
    for group in (explanation or {}).get("groups", []):
        estimate = group.get("estimate")
        if estimate:
            nodes = ", ".join(estimate["reserved_nodes"][:4]) + (
                ", ..." if len(estimate["reserved_nodes"]) > 4 else "")
            when = estimate["expected_start_at"] or "no estimate (work without an " \
                                                    "exec_timeout in the way)"
            return f"{group['name']}: {when} on reserved {nodes}"
    return None


def backend_choice_lines(group: dict) -> list[str]:
    """The backend chosen for a waiting group of a pool naming several, and why each other
    one was passed over."""
    choice = group.get("backend_choice")
    if not choice:
        return []
    return [f"  backend: {choice['backend'] or 'none can take it now'}",
            *(f"  - {other['message']} [{other['code']}]" for other in choice["passed_over"])]


def describe(workflow: dict, explanation: dict | None = None) -> str:
    pending = workflow.get("pending_reason")
    reason = (f"{pending['group']}: {pending['message']}" if pending
              else workflow["reason"] or pending_reason(explanation))
    fields = [("Name", workflow["name"]), ("Kind", workflow["kind"]), ("Pool", workflow["pool"]),
              ("Priority", workflow["priority"]), ("User", workflow["user"]),
              ("Status", workflow["status"]), ("Reason", reason),
              ("GPUs", workflow["gpus_requested"]), ("Submitted", workflow["submitted_at"]),
              ("Started", workflow["started_at"]), ("Finished", workflow["finished_at"])]
    start = expected_start(explanation)
    if start:
        fields.insert(7, ("Expected start", start))
    width = max(len(label) for label, _ in fields) + 1
    text = "".join(f"{label + ':':<{width}} {dash(value)}\n" for label, value in fields)
    rows = [[group["name"], task["name"], task["status"], task["gpus"], dash(task["node"]),
             dash(task["exit_code"])]
            for group in workflow.get("groups", []) for task in group.get("tasks", [])]
    choices = [line for group in (explanation or {}).get("groups", [])
               for line in ([f"{group['name']}:"] + backend_choice_lines(group)
                            if group.get("backend_choice") else [])]
    if choices:
        text += "\nBackends:\n" + "".join(f"{line}\n" for line in choices)
    if rows:
        text += "\n" + table(("Group", "Task", "Status", "GPUs", "Node", "Exit Code"), rows)
    return text


def query(args) -> int:
    with connect(args) as api:
        workflow = api.get(f"api/workflow/{segment(args.name)}")
        explanation = (api.get(f"api/workflow/{segment(args.name)}/explain")
                       if workflow["status"] == "PENDING" else None)
    emit(args, workflow, describe(workflow, explanation))
    return 0


def explain(args) -> int:
    with connect(args) as api:
        explanation = api.get(f"api/workflow/{segment(args.name)}/explain")
    lines = []
    for group in explanation["groups"]:
        lines.append(f"{group['name']} ({group['podgroup']}): {group['status']}")
        lines += [f"  - {reason['message']} [{reason['code']}]" for reason in group["reasons"]]
        estimate = group.get("estimate")
        if estimate:
            lines.append(f"  expected start: {estimate['expected_start_at'] or 'no estimate'}"
                         f" (reserved: {', '.join(estimate['reserved_nodes'])})")
        lines += backend_choice_lines(group)
        if not group["reasons"]:
            lines.append("  - nothing is holding it back")
    emit(args, explanation, "\n".join(lines) + "\n")
    return 0


def cancel(args) -> int:
    with connect(args) as api:
        _, workflow = api.request("POST", f"api/workflow/{segment(args.name)}/cancel")
    emit(args, workflow, f"Workflow {workflow['name']}: {workflow['status']}\n")
    return 0


def logs(args) -> int:
    """Print a workflow's (or a task's) log; with -f, keep printing while it runs."""
    with connect(args) as api:
        for line in api.stream(f"api/workflow/{segment(args.name)}/logs", task_name=args.task,
                               retry_id=args.retry_id, last_n_lines=args.lines, query=args.query,
                               follow="true" if args.follow else "false"):
            print(line, flush=True)
    return 0


def events(args) -> int:
    with connect(args) as api:
        for line in api.stream(f"api/workflow/{segment(args.name)}/events",
                               task_name=args.task, retry_id=args.retry_id):
            print(line, flush=True)
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="workflow_command", required=True, metavar="COMMAND")

    sub = commands.add_parser("submit", help="submit a workflow spec to a pool or subpool")
    sub.add_argument("--pool", help="a top-level pool or a canonical subpool name (team--a); "
                                     "default: your default pool")
    sub.add_argument("--priority", choices=PRIORITIES, default=None,
                     help="HIGH and NORMAL count against quota; LOW is opportunistic "
                          "(default NORMAL)")
    sub.add_argument("--set", action="append", type=key_value, metavar="KEY=VALUE",
                     help="override a template default-value (parsed as YAML); repeatable")
    sub.add_argument("--set-string", action="append", type=key_value, metavar="KEY=VALUE",
                     help="like --set, the value kept as a string; repeatable")
    sub.add_argument("--dry-run", action="store_true",
                     help="run every admission check and show the manifests; submit nothing")
    sub.add_argument("file", metavar="FILE", help="the workflow YAML; its localpath: files are "
                                                  "read relative to its folder")
    add_format_option(sub)
    sub.set_defaults(handler=submit)

    listing = commands.add_parser("list", help="workflows you can see, newest first")
    listing.add_argument("--pool", help="canonical pool name")
    listing.add_argument("--status", action="append", choices=STATUSES,
                         help="repeatable: any of these statuses")
    listing.add_argument("--user", help="submitter's username")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    add_format_option(listing)
    listing.set_defaults(handler=list_workflows)

    for name, handler, summary in (("query", query, "one workflow with its groups and tasks"),
                                   ("explain", explain, "why a workflow's groups still wait"),
                                   ("cancel", cancel, "cancel a workflow; its GPUs are "
                                                      "released")):
        command = commands.add_parser(name, help=summary, description=summary)
        command.add_argument("name", metavar="NAME", help="the workflow's name")
        add_format_option(command)
        command.set_defaults(handler=handler)

    log = commands.add_parser("logs", help="a workflow's log (every task's, or one task's)")
    log.add_argument("name", metavar="NAME", help="the workflow's name")
    log.add_argument("-t", "--task", help="only this task's lines")
    log.add_argument("--retry-id", type=int, metavar="N",
                     help="with -t: the lines of run N of the task's group (default: its latest)")
    log.add_argument("-n", dest="lines", type=int, metavar="N", help="only the last N lines")
    log.add_argument("-f", "--follow", action="store_true",
                     help="keep printing new lines while the task runs")
    log.add_argument("--query", metavar="REGEX", help="only lines matching REGEX (RE2)")
    log.set_defaults(handler=logs)

    event = commands.add_parser("events", help="what happened to a workflow and its tasks")
    event.add_argument("name", metavar="NAME", help="the workflow's name")
    event.add_argument("-t", "--task", help="only this task's events (and the workflow's)")
    event.add_argument("--retry-id", type=int, metavar="N",
                       help="with -t: only the task's events of run N of its group")
    event.set_defaults(handler=events)
