"""What every API command shares: the connection, the output format, printing."""

from __future__ import annotations

import argparse
import sys

from . import config
from .client import Api
from .output import to_json

TEXT, JSON = "text", "json"


def add_format_option(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """`-t json` / `--format json` / `--format-type json` (OSMO's spelling), accepted before
    or after the command."""
    parser.add_argument("-t", "--format", "--format-type", dest="format", choices=[TEXT, JSON],
                        default=TEXT if top_level else argparse.SUPPRESS,
                        help="output: text tables (default) or json for scripts")


def connect(args) -> Api:
    credentials = config.credentials(getattr(args, "profile", None))
    return Api(credentials.url, credentials.token)


def emit(args, body, text: str) -> None:
    """JSON (the API's own body) or the human text."""
    sys.stdout.write(to_json(body) if args.format == JSON else text)
