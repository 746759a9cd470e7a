"""`osmo config list|show|history|diff|rollback`: the revisions of the POOL and BACKEND
configs, as OSMO's client names them (`TYPE` or `TYPE:REVISION`, e.g. `POOL:4`)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from .common import add_format_option, connect, emit
from .errors import usage_error
from .output import dash, table

CONFIG_TYPES = ("BACKEND", "POOL")


def parse_revision(text: str, *, required: bool = False) -> tuple[str, int | None]:
    """`POOL` → ("POOL", None); `pool:4` → ("POOL", 4)."""
    config_type, _, revision = text.partition(":")
    config_type = config_type.upper()
    if config_type not in CONFIG_TYPES:
        raise usage_error(f"unknown config type '{config_type}': one of "
                          f"{', '.join(CONFIG_TYPES)}")
    if not revision:
        if required:
            raise usage_error(f"give a revision: {config_type}:<revision>")
        return config_type, None
    if not revision.isascii() or not revision.isdigit() or int(revision) < 1:
        raise usage_error(f"'{revision}' is not a revision number (1, 2, ...)")
    return config_type, int(revision)


def _latest(api, config_type: str) -> dict:
    rows = api.get("api/configs/history", config_types=config_type, order="DESC", limit=1)
    if not rows["configs"]:
        raise usage_error(f"{config_type} has no revisions yet")
    return rows["configs"][0]


def _change(diff: dict) -> str:
    """One line of what changed; a config that appears or goes is said so, not listed."""
    if diff and all(change["before"] is None for change in diff.values()):
        return "created"
    if diff and all(change["after"] is None for change in diff.values()):
        return "deleted"
    return "; ".join(f"{field}: {_short(change['before'])} → {_short(change['after'])}"
                     for field, change in diff.items()) or "-"


def _short(value) -> str:
    text = "-" if value is None else json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:39] + "…"


def list_configs(args) -> int:
    with connect(args) as api:
        body = api.get("api/configs/history", omit_data="true",
                       at_timestamp=datetime.now(UTC).isoformat())
    rows = [[c["config_type"], c["revision"], c["username"], c["created_at"]]
            for c in sorted(body["configs"], key=lambda c: c["config_type"])]
    emit(args, body, table(("Config Type", "Revision", "Username", "Created At"), rows)
         if rows else "No revisions yet.\n")
    return 0


def show(args) -> int:
    config_type, revision = parse_revision(args.config)
    with connect(args) as api:
        if revision is None:
            revision = _latest(api, config_type)["revision"]
        rows = api.get("api/configs/history", config_types=config_type, revision=revision)
    if not rows["configs"]:
        raise usage_error(f"{config_type} has no revision {revision}")
    data = rows["configs"][0]["data"]
    if args.names:
        data = data["pools"] if config_type == "POOL" else {b["name"]: b for b in data}
        for name in args.names:
            if not isinstance(data, dict) or name not in data:
                raise usage_error(f"no '{name}' in {config_type}:{revision}")
            data = data[name]
    emit(args, data, json.dumps(data, indent=2) + "\n")
    return 0


def history(args) -> int:
    params = {"omit_data": "true", "offset": args.offset, "limit": args.count,
              "order": args.order.upper(), "name": args.name, "revision": args.revision,
              "tags": args.tags, "created_before": args.created_before,
              "created_after": args.created_after, "at_timestamp": args.at_timestamp}
    if args.config:
        params["config_types"] = parse_revision(args.config)[0]
    with connect(args) as api:
        body = api.get("api/configs/history", **params)
    rows = [[c["config_type"], c["name"], c["revision"], c["username"], c["created_at"],
             c["action"], _change(c["diff"]), dash(", ".join(c["tags"]))]
            for c in body["configs"]]
    emit(args, body, table(("Config Type", "Name", "Revision", "Username", "Created At",
                            "Action", "Change", "Tags"), rows) if rows
         else "No revisions match.\n")
    return 0


def diff(args) -> int:
    config_type, first = parse_revision(args.first)
    second_type, second = parse_revision(args.second) if args.second else (config_type, None)
    if second_type != config_type:
        raise usage_error(f"cannot diff {config_type} with {second_type}")
    with connect(args) as api:
        if first is None or second is None:
            latest = _latest(api, config_type)["revision"]
            first, second = first or latest, second or latest
        body = api.get("api/configs/diff", config_type=config_type, first_revision=first,
                       second_revision=second)
    lines = [f"{name}: {_change(fields)}" for name, fields in body["diff"].items()]
    text = ("\n".join(lines) + "\n" if lines
            else f"No differences between {config_type}:{first} and {config_type}:{second}.\n")
    emit(args, body, text)
    return 0


def rollback(args) -> int:
    config_type, revision = parse_revision(args.revision, required=True)
    body = {"config_type": config_type, "revision": revision, "tags": args.tags or []}
    if args.description:
        body["description"] = args.description
    with connect(args) as api:
        _, result = api.request("POST", "api/configs/history/rollback", json=body)
    written = [f"{c['config_type']}:{c['revision']} ({c['name']}: {c['action']})"
               for c in result["configs"]]
    text = (f"Rolled back to {config_type}:{revision}: wrote {', '.join(written)}.\n" if written
            else f"Nothing to roll back: it already is as {config_type}:{revision} left it.\n")
    emit(args, result, text)
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    command = commands.add_parser("list", help="each config type's current revision")
    add_format_option(command)
    command.set_defaults(handler=list_configs)

    command = commands.add_parser("show", help="a config as a revision left it (JSON)")
    command.add_argument("config", help="TYPE (its latest revision) or TYPE:REVISION")
    command.add_argument("names", nargs="*", help="a pool, subpool or backend name")
    add_format_option(command)
    command.set_defaults(handler=show)

    command = commands.add_parser("history", help="revisions: who changed what, when")
    command.add_argument("config", nargs="?", help="POOL or BACKEND (default: both)")
    command.add_argument("--name", help="only this pool, subpool or backend")
    command.add_argument("--revision", type=int)
    command.add_argument("--tags", nargs="+", help="only revisions with all these tags")
    command.add_argument("--offset", type=int, default=0,
                         help="skip this many of the newest")
    command.add_argument("--count", type=int, default=20, help="at most this many (≤ 1000)")
    command.add_argument("--order", choices=["asc", "desc"], default="asc")
    command.add_argument("--created-before", help="ISO time")
    command.add_argument("--created-after", help="ISO time")
    command.add_argument("--at-timestamp", help="ISO time: the revision in force then")
    add_format_option(command)
    command.set_defaults(handler=history)

    command = commands.add_parser("diff", help="what differs between two revisions")
    command.add_argument("first", help="TYPE:REVISION (TYPE alone: the latest)")
    command.add_argument("second", nargs="?", help="TYPE:REVISION (default: the latest)")
    add_format_option(command)
    command.set_defaults(handler=diff)

    command = commands.add_parser(
        "rollback", help="put a revision's pool, subpool or backend back as it left it")
    command.add_argument("revision", help="TYPE:REVISION, e.g. POOL:4")
    command.add_argument("--description", help="why (recorded with the new revision)")
    command.add_argument("--tags", nargs="+", help="tags for the new revision")
    add_format_option(command)
    command.set_defaults(handler=rollback)
