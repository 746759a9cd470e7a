"""`osmo credential set|list|delete`: your registry, data and generic credentials (OSMO's
command). Values go to the server once, sealed there; nothing prints them back."""

from __future__ import annotations

import argparse
from pathlib import Path

from .client import segment
from .common import add_format_option, connect, emit
from .errors import usage_error
from .output import dash, table

TYPES = ("REGISTRY", "DATA", "GENERIC")


def _payload(args) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in args.payload or args.payload_file:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise usage_error(f"'{key}=…' is not a non-empty key=value pair")
        if args.payload_file:
            try:
                value = Path(value).expanduser().read_text()
            except OSError as error:
                raise usage_error(f"cannot read {value}: {error.strerror or error}") from error
        pairs[key] = value
    return pairs


def set_credential(args) -> int:
    payload = _payload(args)
    body = {"credential": payload} if args.type == "GENERIC" else payload
    with connect(args) as api:
        _, answer = api.request("POST", f"api/credentials/{segment(args.name)}",
                                json={f"{args.type.lower()}_credential": body})
    emit(args, answer, f"Set {args.type} credential {args.name}.\n")
    return 0


def list_credentials(args) -> int:
    with connect(args) as api:
        answer = api.get("api/credentials")
    rows = [[c["cred_name"], c["cred_type"], dash(c["profile"]), ", ".join(c["keys"])]
            for c in answer["credentials"]]
    emit(args, answer, table(("Name", "Type", "Profile", "Keys"), rows) if rows
         else "No credentials.\n")
    return 0


def delete_credential(args) -> int:
    with connect(args) as api:
        _, answer = api.request("DELETE", f"api/credentials/{segment(args.name)}")
    emit(args, answer, f"Deleted credential {args.name}.\n")
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="credential_command", required=True,
                                     metavar="COMMAND")
    command = commands.add_parser(
        "set", help="create or replace a credential",
        epilog="REGISTRY: auth (registry, username optional); DATA: endpoint, access_key_id, "
               "access_key (region optional); GENERIC: any keys. A task names it under "
               "`credentials:` (a mount path, or {VARIABLE: key}; null for a REGISTRY one).")
    command.add_argument("name", help="a letter, then letters, digits, '-' or '_'")
    command.add_argument("--type", choices=TYPES, default="GENERIC")
    given = command.add_mutually_exclusive_group(required=True)
    given.add_argument("--payload", nargs="+", metavar="KEY=VALUE")
    given.add_argument("--payload-file", dest="payload_file", nargs="+", metavar="KEY=PATH",
                       help="each value read from a file")
    add_format_option(command)
    command.set_defaults(handler=set_credential)
    command = commands.add_parser("list", help="your credentials: names, types, keys")
    add_format_option(command)
    command.set_defaults(handler=list_credentials)
    command = commands.add_parser("delete", help="delete one of your credentials")
    command.add_argument("name")
    add_format_option(command)
    command.set_defaults(handler=delete_credential)
