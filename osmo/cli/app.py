"""`osmo app create|update|info|show|spec|list|delete|rename|submit`: saved, versioned
workflow specs (OSMO's command). `NAME:VERSION` picks a version; without one, the newest."""

from __future__ import annotations

import argparse

import yaml

from .client import segment
from .common import add_format_option, connect, emit
from .errors import usage_error
from .output import dash, table
from .workflow import PRIORITIES, key_value, read_spec


def _name(text: str) -> tuple[str, int | None]:
    name, sep, version = text.partition(":")
    if not sep:
        return name, None
    if not version.isdigit() or int(version) < 1:
        raise usage_error(f"'{text}': a version is a number from 1 (NAME:VERSION)")
    return name, int(version)


def _path(name: str, tail: str = "") -> str:
    return f"api/app/user/{segment(name)}{tail}"


def _spec(api, name: str, version: int | None) -> str:
    return "\n".join(api.stream(_path(name, "/spec"), version=version)) + "\n"


def create(args) -> int:
    name, version = _name(args.name)
    if version is not None:
        raise usage_error("an app is created at version 1: give NAME only")
    with connect(args) as api:
        _, answer = api.request("POST", _path(name), params={"description": args.description},
                                json=read_spec(args.file))
    emit(args, answer, f"App {name} created (version {answer['version']}).\n")
    return 0


def update(args) -> int:
    name, _ = _name(args.name)
    with connect(args) as api:
        _, answer = api.request("PATCH", _path(name), json=read_spec(args.file))
    emit(args, answer, f"App {name} updated: version {answer['version']}.\n")
    return 0


def info(args) -> int:
    name, version = _name(args.name)
    with connect(args) as api:
        answer = api.get(_path(name), version=version, limit=args.count,
                         order=args.order.upper())
    rows = [[v["version"], v["created_by"], v["created_date"], v["status"]]
            for v in answer["versions"]]
    text = (f"Name: {answer['name']}\nUUID: {answer['uuid']}\nOwner: {answer['owner']}\n"
            f"Created: {answer['created_date']}\nDescription: {dash(answer['description'])}\n\n"
            + table(("Version", "Created by", "Created", "Status"), rows))
    emit(args, answer, text)
    return 0


def show(args) -> int:
    name, version = _name(args.name)
    with connect(args) as api:
        answer = api.get(_path(name))
        spec = _spec(api, name, version)
    try:
        defaults = (yaml.safe_load(spec.split("default-values:", 1)[1])
                    if "default-values:" in spec else None)
    except yaml.YAMLError:
        defaults = None
    text = f"DESCRIPTION\n    {dash(answer['description'])}\n"
    if defaults:
        text += "PARAMETERS\n" + "".join(f"    {k}: {v}\n" for k, v in defaults.items())
    emit(args, {**answer, "parameters": defaults or {}}, text)
    return 0


def spec(args) -> int:
    name, version = _name(args.name)
    with connect(args) as api:
        text = _spec(api, name, version)
    emit(args, {"name": name, "version": version, "spec": text}, text)
    return 0


def list_apps(args) -> int:
    with connect(args) as api:
        answer = api.get("api/app", name=args.name, users=args.user,
                         all_users="true" if args.all_users else None, limit=args.count,
                         order=args.order.upper())
    rows = [[a["owner"], a["name"], dash(a["description"]), a["created_date"],
             a["latest_version"]] for a in answer["apps"]]
    emit(args, answer, table(("Owner", "Name", "Description", "Created", "Latest"), rows)
         if rows else "There are no apps to view.\n")
    return 0


def delete(args) -> int:
    name, version = _name(args.name)
    if not args.all and version is None:
        raise usage_error("give NAME:VERSION, or --all for every version")
    params = {"all_versions": "true"} if args.all else {"version": version}
    with connect(args) as api:
        _, answer = api.request("DELETE", _path(name), params=params)
    emit(args, answer, "".join(f"Deleted app {name} version {v}.\n"
                               for v in answer["versions"]))
    return 0


def rename(args) -> int:
    with connect(args) as api:
        _, answer = api.request("POST", _path(args.original_name, "/rename"),
                                json=args.new_name)
    emit(args, answer, f"App {args.original_name} renamed to {answer}.\n")
    return 0


def submit(args) -> int:
    name, version = _name(args.name)
    with connect(args) as api:
        found = api.get(_path(name), version=version, limit=1)
        text = _spec(api, name, version)
        pool = args.pool or api.get("api/profile/settings")["profile"].get("pool")
        if not pool:
            raise usage_error("no --pool given and no default pool set: pass --pool NAME")
        params = {"app_uuid": found["uuid"], "app_version": found["versions"][0]["version"],
                  "dry_run": "true" if args.dry_run else "false"}
        if args.priority:
            params["priority"] = args.priority
        _, answer = api.request("POST", f"api/pool/{segment(pool)}/workflow", params=params,
                                json={"file": text, "set_variables": args.set or [],
                                      "set_string_variables": args.set_string or []})
    workflow = answer.get("workflow", answer)
    emit(args, answer, f"{'Dry run' if args.dry_run else 'Submitted'} {workflow['name']} "
                       f"from app {name} version {params['app_version']} to pool "
                       f"{workflow['pool']}: {workflow['status']}\n")
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="app_command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, handler, *, versioned: bool = True):
        sub = commands.add_parser(name, help=summary, description=summary)
        if versioned:
            sub.add_argument("name", metavar="NAME[:VERSION]")
        add_format_option(sub)
        sub.set_defaults(handler=handler)
        return sub

    sub = command("create", "create an app from a workflow file (version 1)", create)
    sub.add_argument("-d", "--description", required=True)
    sub.add_argument("-f", "--file", required=True, help="the workflow YAML")
    sub = command("update", "add a version from a workflow file", update)
    sub.add_argument("-f", "--file", required=True, help="the workflow YAML")
    sub = command("info", "an app and its versions", info)
    sub.add_argument("-c", "--count", type=int, default=20)
    sub.add_argument("-o", "--order", choices=("asc", "desc"), default="asc")
    command("show", "an app's description and parameters (default-values)", show)
    command("spec", "an app version's spec", spec)
    sub = command("list", "apps you made (or --user U, or --all-users)", list_apps,
                  versioned=False)
    sub.add_argument("-n", "--name", help="names containing this")
    sub.add_argument("-u", "--user", nargs="+")
    sub.add_argument("-a", "--all-users", action="store_true")
    sub.add_argument("-c", "--count", type=int, default=20)
    sub.add_argument("-o", "--order", choices=("asc", "desc"), default="asc")
    sub = command("delete", "delete a version (NAME:VERSION) or --all of them", delete)
    sub.add_argument("-a", "--all", action="store_true")
    sub.add_argument("-f", "--force", action="store_true", help="accepted: no prompt here")
    sub = command("rename", "rename your app", rename, versioned=False)
    sub.add_argument("original_name")
    sub.add_argument("new_name")
    sub.add_argument("-f", "--force", action="store_true", help="accepted: no prompt here")
    sub = command("submit", "submit an app version as a workflow", submit)
    sub.add_argument("-p", "--pool")
    sub.add_argument("--priority", choices=PRIORITIES, type=str.upper)
    sub.add_argument("--set", nargs="+", type=key_value, metavar="KEY=VALUE")
    sub.add_argument("--set-string", dest="set_string", nargs="+", type=key_value,
                     metavar="KEY=VALUE")
    sub.add_argument("--dry-run", action="store_true")
