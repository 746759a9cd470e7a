"""The `osmo` command line."""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="osmo", description="OSMO GPU platform")
    commands = parser.add_subparsers(dest="command", required=True)

    from osmo import standalone

    standalone.build_parser(commands.add_parser(
        "standalone", help="Run everything (database, broker, web, worker, beat, scheduler)."))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "standalone":
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
        from osmo.standalone import Standalone

        return Standalone(args).run()
    return 2


if __name__ == "__main__":
    sys.exit(main())
