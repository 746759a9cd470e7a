"""`osmo backend list`: the clusters that run pods, their status and capacity."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from .common import add_format_option, connect, emit
from .output import table

HEADERS = ("Backend", "Kind", "Placement", "Status", "Heartbeat", "Nodes", "GPUs (free/total)",
           "Pools")


def heartbeat_age(stamp: str | None, now: datetime) -> str:
    """How long ago the agent was last heard: `12s`, `5m`, `3h`, `2d`; `-` never."""
    if not stamp:
        return "-"
    seconds = max(0, int((now - datetime.fromisoformat(stamp.replace("Z", "+00:00")))
                         .total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def backend_rows(backends: list[dict], now: datetime) -> list[list[str]]:
    return [[b["name"], b["kind"], b["placement"], b["status"],
             heartbeat_age(b["last_heartbeat"], now), str(b["nodes"]),
             f"{b['gpus_free']}/{b['gpus']}", ", ".join(b["pools"]) or "-"]
            for b in backends]


def list_backends(args) -> int:
    with connect(args) as api:
        body = api.get("api/configs/backend")
    emit(args, body, table(HEADERS, backend_rows(body["backends"],
                                                 datetime.now(UTC))))
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="backend_command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="backends with status, nodes and GPUs")
    add_format_option(listing)
    listing.set_defaults(handler=list_backends)
