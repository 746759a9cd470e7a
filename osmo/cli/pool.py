"""`osmo pool list` and `osmo pool subpool create|update|delete` (seed 002)."""

from __future__ import annotations

import argparse
import sys

from .client import segment
from .common import JSON, add_format_option, connect, emit
from .errors import EXIT_API_ERROR, EXIT_OK
from .output import table

HEADERS = ("Pool", "Status", "Subpool State", "GPU Quota", "Used", "Available")
# With LOW usage anywhere: what opportunistic work holds, and the sum of both.
LOW_HEADERS = ("LOW", "Total Usage")
FREE_HEADERS = ("Pool", "Status", "Subpool State", "GPU Quota", "Free")
# The seed's layout: Pool and Status columns at least 14 and 13 wide, every column wider when
# its content is.
MIN_WIDTHS = (14, 13)
USED, FREE = "used", "free"


def _state(row: dict) -> str:
    """The subpool state, with drain progress on DELETING rows."""
    drain = row.get("drain")
    if not row.get("subpool_state"):
        return "-"
    if drain:
        return (f"{row['subpool_state']} ({drain['running_workflows']} running, "
                f"{drain['gpus_held']} GPUs held)")
    return row["subpool_state"]


def _low(row: dict) -> int:
    return row.get("total_usage_gpus", row["used_gpus"]) - row["used_gpus"]


def _selected(report: dict, names: list[str] | None) -> list[tuple[dict, list[dict]]]:
    """(parent, subpools) pairs; with ``names``, the pools named and the parents of the
    subpools named (a parent named shows all its subpools)."""
    chosen = []
    for parent in report.get("pools", []):
        subpools = parent.get("subpools", [])
        if names and parent["name"] not in names:
            subpools = [s for s in subpools if s["name"] in names]
            if not subpools:
                continue
        chosen.append((parent, subpools))
    return chosen


def pool_rows(report: dict, names: list[str] | None = None, *, mode: str = USED,
              with_low: bool = False) -> list[list[str]]:
    """Parents with their subpools as a tree, from `GET /api/pool_quota`."""
    rows = []
    for parent, subpools in _selected(report, names):
        entries = [(parent["name"], parent, f"{parent['quota_gpus']} (Total: "
                                            f"{parent['total_quota_gpus']})")]
        entries += [(f"{'└─' if i == len(subpools) - 1 else '├─'} {s['name']}", s,
                     str(s["quota_gpus"])) for i, s in enumerate(subpools)]
        for label, row, quota in entries:
            if mode == FREE:
                rows.append([label, row["status"], _state(row), quota,
                             str(row["available_gpus"])])
                continue
            cells = [label, row["status"], _state(row), quota, str(row["used_gpus"]),
                     str(row["available_gpus"])]
            if with_low:
                cells += [str(_low(row)), str(row.get("total_usage_gpus", row["used_gpus"]))]
            rows.append(cells)
    return rows


def pool_table(report: dict, names: list[str] | None = None, *, mode: str = USED) -> str:
    if mode == FREE:
        return table(FREE_HEADERS, pool_rows(report, names, mode=FREE), MIN_WIDTHS)
    chosen = _selected(report, names)
    with_low = any(_low(row) for parent, subpools in chosen for row in (parent, *subpools))
    headers = HEADERS + LOW_HEADERS if with_low else HEADERS
    return table(headers, pool_rows(report, names, with_low=with_low), MIN_WIDTHS)


def _visible_names(report: dict) -> set[str]:
    return {row["name"] for parent in report.get("pools", [])
            for row in (parent, *parent.get("subpools", []))}


def list_pools(args) -> int:
    """Pools named with `-p` that the caller cannot see are errors (exit 1, as for any name
    that is not found), after the table of those that are; a list with nothing in it says so."""
    with connect(args) as api:
        report = api.get("api/pool_quota",
                         include_archived="true" if args.include_archived else None)
    visible = _visible_names(report)
    missing = [name for name in dict.fromkeys(args.pool or []) if name not in visible]
    if args.format == JSON or _selected(report, args.pool):
        emit(args, report, pool_table(report, args.pool, mode=args.mode))
    elif not args.pool:
        print("No pool is visible to you: you have no role in any pool.")
    for name in missing:
        print(f"error: no pool or subpool named '{name}' is visible to you: it does not exist, "
              "or you have no role in it (pool_not_found)", file=sys.stderr)
    return EXIT_API_ERROR if missing else EXIT_OK


def pool_default(args) -> int:
    with connect(args) as api:
        if args.name:
            _, settings = api.request("POST", "api/profile/settings",
                                      json={"pool": args.name})
        else:
            settings = api.get("api/profile/settings")
    pool = settings["profile"].get("pool")
    emit(args, settings, f"Default pool: {pool}\n" if pool else "No default pool.\n")
    return 0


def pool_put(args) -> int:
    """Create or update a top-level pool (platform admins)."""
    body = {key: value for key, value in (
        ("quota_gpus", args.quota), ("limit_gpus", args.limit), ("weight", args.weight),
        ("description", args.description)) if value is not None}
    with connect(args) as api:
        if args.quota is None:  # an update of some fields: keep the current quota
            body["quota_gpus"] = api.get(f"api/configs/pool/{segment(args.name)}")["quota_gpus"]
        status, answer = api.request("PUT", f"api/configs/pool/{segment(args.name)}", json=body)
    verb = "Created" if status == 201 else "Updated"
    emit(args, answer, f"{verb} pool {answer['name']}: quota {answer['quota_gpus']} GPUs, "
                       f"limit {answer['limit_gpus']}, weight {answer['weight']}\n")
    return 0


def _describe(subpool: dict) -> str:
    text = (f"{subpool['canonical_name']}: {subpool['state']}, quota {subpool['quota_gpus']} "
            f"GPUs, used {subpool['used_gpus']}, available {subpool['available_gpus']}")
    drain = subpool.get("drain")
    if drain:
        text += (f"; draining {drain['running_workflows']} running workflow(s) holding "
                 f"{drain['gpus_held']} GPUs")
    return text


def subpool_create(args) -> int:
    with connect(args) as api:
        status, body = api.request(
            "POST", f"api/configs/pool/{segment(args.parent)}/subpool",
            json={"name": args.subpool, "quota_gpus": args.quota})
    verb = "Created" if status == 201 else "Reactivated"
    emit(args, body, f"{verb} subpool {_describe(body)}\n")
    return 0


def subpool_update(args) -> int:
    with connect(args) as api:
        _, body = api.request(
            "PUT", f"api/configs/pool/{segment(args.parent)}/subpool/{segment(args.subpool)}",
            json={"quota_gpus": args.quota})
    emit(args, body, f"Updated subpool {_describe(body)}\n")
    return 0


def subpool_delete(args) -> int:
    with connect(args) as api:
        status, body = api.request(
            "DELETE", f"api/configs/pool/{segment(args.parent)}/subpool/{segment(args.subpool)}")
    if status == 202:
        text = (f"Subpool {_describe(body)}. It takes no new work and becomes ARCHIVED once its "
                f"running workflows finish.\n")
    else:
        text = f"Subpool {_describe(body)}.\n"
    emit(args, body, text)
    return 0


def non_negative_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number of GPUs") from None
    if number < 0:
        raise argparse.ArgumentTypeError("a quota cannot be negative")
    return number


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="pool_command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="pools and subpools with quota and usage")
    listing.add_argument("--include-archived", action="store_true",
                         help="also list ARCHIVED subpools")
    listing.add_argument("-p", "--pool", action="append", metavar="NAME",
                         help="only this pool or subpool (repeatable)")
    listing.add_argument("--mode", choices=[USED, FREE], default=USED,
                         help="used: quota and usage (LOW columns when LOW work runs); "
                              "free: what each pool can still take")
    add_format_option(listing)
    listing.set_defaults(handler=list_pools)

    default = commands.add_parser("default", help="show or set your default pool (what "
                                                  "`workflow submit` uses without --pool)")
    default.add_argument("name", nargs="?", help="the pool to make your default")
    add_format_option(default)
    default.set_defaults(handler=pool_default)

    for name, summary in (("create", "create a top-level pool (platform admins)"),
                          ("update", "change a top-level pool (platform admins)")):
        action = commands.add_parser(name, help=summary, description=summary)
        action.add_argument("name", help="the top-level pool")
        action.add_argument("--quota", type=non_negative_int, required=name == "create",
                            metavar="N", help="guaranteed GPUs")
        action.add_argument("--limit", type=int, metavar="N", help="most GPUs (-1: no limit)")
        action.add_argument("--weight", type=int, metavar="N", help="over-quota weight")
        action.add_argument("--description")
        add_format_option(action)
        action.set_defaults(handler=pool_put)

    subpool = commands.add_parser("subpool", help="create, update or delete subpools")
    actions = subpool.add_subparsers(dest="subpool_command", required=True, metavar="COMMAND")
    for name, handler, summary, needs_quota in (
        ("create", subpool_create, "create a subpool (or reactivate an ARCHIVED one)", True),
        ("update", subpool_update, "change an ACTIVE subpool's quota (decreases are soft)",
         True),
        ("delete", subpool_delete, "archive a subpool now, or drain it first if work runs",
         False),
    ):
        action = actions.add_parser(name, help=summary, description=summary)
        action.add_argument("parent", help="the top-level pool")
        action.add_argument("subpool", help="the subpool's short name (team--a is 'a')")
        if needs_quota:
            action.add_argument("--quota", type=non_negative_int, required=True, metavar="N",
                                help="guaranteed GPUs")
        add_format_option(action)
        action.set_defaults(handler=handler)
