"""`osmo login --url URL --token TOKEN`: check the token, then store the profile (warning on
stderr when it replaces another login of the same profile name)."""

from __future__ import annotations

import argparse
import sys

from . import config
from .client import Api
from .common import add_format_option, emit
from .errors import usage_error


def login(args) -> int:
    url = args.url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise usage_error(f"--url must start with http:// or https://, not '{args.url}'")
    token = sys.stdin.readline().strip() if args.token == "-" else args.token.strip()
    if not token:
        raise usage_error("the token is empty")
    with Api(url, token) as api:
        whoami = api.get("api/whoami")  # a wrong token or URL fails here, before saving
    replaced = config.stored_profile(args.profile)
    if replaced and (replaced.get("url"), replaced.get("user")) != (url, whoami.get("user")):
        # One profile per name: say what is replaced, and how to keep both.
        name = args.profile or config.DEFAULT_PROFILE
        print(f"warning: this replaces the profile '{name}' ({replaced.get('user')} at "
              f"{replaced.get('url')}); `osmo --profile NAME login ...` keeps each login "
              "under its own name", file=sys.stderr)
    path = config.save_profile(url=url, token=token, user=whoami.get("user"),
                               profile=args.profile)
    emit(args, whoami, f"Logged in to {url} as {whoami.get('user')} (saved in {path}).\n")
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="the OSMO service, e.g. "
                                                     "http://127.0.0.1:8000")
    parser.add_argument("--token", required=True,
                        help="a personal access token ('-' reads it from stdin)")
    add_format_option(parser)
    parser.set_defaults(handler=login)
