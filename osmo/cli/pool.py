"""`osmo pool list` and `osmo pool subpool create|update|delete` (seed 002)."""

from __future__ import annotations

import argparse

from .client import segment
from .common import add_format_option, connect, emit
from .output import table

HEADERS = ("Pool", "Status", "Subpool State", "GPU Quota", "Used", "Available")
# The seed's layout: Pool and Status columns at least 14 and 13 wide, every column wider when
# its content is.
MIN_WIDTHS = (14, 13)


def pool_rows(report: dict) -> list[list[str]]:
    """Parents with their subpools as a tree, from `GET /api/pool_quota`."""
    rows = []
    for parent in report.get("pools", []):
        rows.append([parent["name"], parent["status"], "-",
                     f"{parent['quota_gpus']} (Total: {parent['total_quota_gpus']})",
                     str(parent["used_gpus"]), str(parent["available_gpus"])])
        subpools = parent.get("subpools", [])
        for index, subpool in enumerate(subpools):
            branch = "└─" if index == len(subpools) - 1 else "├─"
            rows.append([f"{branch} {subpool['name']}", subpool["status"],
                         subpool["subpool_state"] or "-", str(subpool["quota_gpus"]),
                         str(subpool["used_gpus"]), str(subpool["available_gpus"])])
    return rows


def pool_table(report: dict) -> str:
    return table(HEADERS, pool_rows(report), MIN_WIDTHS)


def list_pools(args) -> int:
    with connect(args) as api:
        report = api.get("api/pool_quota",
                         include_archived="true" if args.include_archived else None)
    emit(args, report, pool_table(report))
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
    add_format_option(listing)
    listing.set_defaults(handler=list_pools)

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
