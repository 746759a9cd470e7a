"""The `osmo` command line: `osmo standalone` runs the service; the other commands talk to a
running one over its REST API (`osmo login` first, or OSMO_URL and OSMO_TOKEN)."""

from __future__ import annotations

import argparse
import os
import sys

from osmo import standalone

from . import (
    app,
    backend,
    backend_agent,
    common,
    config_history,
    credential,
    login,
    pool,
    profile,
    token,
    workflow,
)
from .errors import EXIT_CODES_HELP, CliError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="osmo", description="OSMO GPU platform",
                                     epilog=EXIT_CODES_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default=None,
                        help="the stored login profile to use (default: the last one); with "
                             "`login`, the name to store it under (default: 'default')")
    common.add_format_option(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", required=True)

    standalone.build_parser(commands.add_parser(
        "standalone", help="Run everything (database, broker, web, worker, beat, scheduler)."))
    login.build_parser(commands.add_parser(
        "login", help="Check a token against a server and store it as a profile."))
    pool.build_parser(commands.add_parser(
        "pool", help="Pools and subpools: list quota and usage, manage subpools."))
    backend.build_parser(commands.add_parser(
        "backend", help="Backends (the clusters that run pods): list them."))
    config_history.build_parser(commands.add_parser(
        "config", help="Config history of pools and backends: list, show, diff, roll back."))
    backend_agent.build_parser(commands.add_parser(
        "backend-agent", help="Serve one Kubernetes backend: dial out to the service."))
    workflow.build_parser(commands.add_parser(
        "workflow", help="Submit, list, inspect and cancel workflows."))
    token.build_parser(commands.add_parser(
        "token", help="Personal access tokens: create, list, revoke."))
    credential.build_parser(commands.add_parser(
        "credential", help="Your registry, data and generic credentials: set, list, delete."))
    app.build_parser(commands.add_parser(
        "app", help="Saved, versioned workflow specs: create, update, submit, ..."))
    profile.build_parser(commands.add_parser(
        "profile", help="Your settings: default pool, notifications."))
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return exit_.code if isinstance(exit_.code, int) else 2
    if args.command == "standalone":
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
        return standalone.Standalone(args).run()
    try:
        return args.handler(args)
    except CliError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
