"""`osmo token create|list|revoke`: personal access tokens over the API (platform admins may
manage anyone's with `--user`)."""

from __future__ import annotations

import argparse

from .common import add_format_option, connect, emit
from .output import dash, table


def create(args) -> int:
    body = {"name": args.name or ""}
    if args.user:
        body["user"] = args.user
    with connect(args) as api:
        _, token = api.request("POST", "api/auth/access_token", json=body)
    emit(args, token, f"{token['token']}\n")  # the only line: scripts read it as issue_token's
    return 0


def list_tokens(args) -> int:
    with connect(args) as api:
        tokens = api.get("api/auth/access_token", user=args.user,
                         include_revoked="true" if args.all else None)
    rows = [[t["id"], t["user"], dash(t["name"]), f"{t['prefix']}…", t["created_at"],
             dash(t["revoked_at"])] for t in tokens]
    text = (table(("ID", "User", "Name", "Token", "Created", "Revoked"), rows) if rows
            else "No access tokens.\n")
    emit(args, tokens, text)
    return 0


def revoke(args) -> int:
    with connect(args) as api:
        _, token = api.request("DELETE", f"api/auth/access_token/{args.id}")
    emit(args, token, f"Revoked token {token['id']} ({token['prefix']}…) of {token['user']}.\n")
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    command = commands.add_parser("create", help="a new token, printed once")
    command.add_argument("--name", help="what you call it (laptop, ci, ...)")
    command.add_argument("--user", help="platform admins: for this user")
    add_format_option(command)
    command.set_defaults(handler=create)
    command = commands.add_parser("list", help="your tokens (their first characters only)")
    command.add_argument("--user", help="platform admins: this user's tokens")
    command.add_argument("--all", action="store_true", help="revoked ones too")
    add_format_option(command)
    command.set_defaults(handler=list_tokens)
    command = commands.add_parser("revoke", help="revoke a token by its id")
    command.add_argument("id", type=int)
    add_format_option(command)
    command.set_defaults(handler=revoke)
