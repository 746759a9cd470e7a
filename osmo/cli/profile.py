"""`osmo profile list|set`: the caller's settings as NVIDIA's client names them — the default
pool and the notifications sent when a workflow ends (`set notifications email|slack
true|false`, with the address or the webhook they go to)."""

from __future__ import annotations

import argparse

from .common import add_format_option, connect, emit


def _text(body: dict) -> str:
    profile = body["profile"]
    slack = "on" if profile["slack_notification"] else "off"
    return (f"User: {profile['username']}\n"
            f"Default pool: {profile['pool'] or '-'}\n"
            f"Email notifications: {'on' if profile['email_notification'] else 'off'}"
            f" ({profile.get('email') or 'no address'})\n"
            f"Slack notifications: {slack}"
            f" ({'webhook set' if profile.get('slack_webhook_set') else 'no webhook'})\n"
            f"Pools: {', '.join(body['pools']) or '-'}\n")


def list_profile(args) -> int:
    with connect(args) as api:
        body = api.get("api/profile/settings")
    emit(args, body, _text(body))
    return 0


def set_pool(args) -> int:
    return _post(args, {"pool": args.pool})


def set_notifications(args) -> int:
    body = {f"{args.channel}_notification": args.enabled == "true"}
    if args.address is not None:
        body["email"] = args.address
    if args.webhook is not None:
        body["slack_webhook"] = args.webhook
    return _post(args, body)


def _post(args, body: dict) -> int:
    with connect(args) as api:
        _, result = api.request("POST", "api/profile/settings", json=body)
    emit(args, result, _text(result))
    return 0


def build_parser(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="profile_command", required=True, metavar="COMMAND")
    command = commands.add_parser("list", help="your settings and the pools you may use")
    add_format_option(command)
    command.set_defaults(handler=list_profile)
    command = commands.add_parser("set", help="set your default pool or notifications")
    settings = command.add_subparsers(dest="setting", required=True, metavar="SETTING")
    pool = settings.add_parser("pool", help="where submissions without --pool go")
    pool.add_argument("pool", help="a pool name; '' clears it")
    add_format_option(pool)
    pool.set_defaults(handler=set_pool)
    notify = settings.add_parser("notifications", help="a message when a workflow ends")
    notify.add_argument("channel", choices=("email", "slack"))
    notify.add_argument("enabled", choices=("true", "false"))
    notify.add_argument("--address", help="email: where it goes (default: your account's)")
    notify.add_argument("--webhook", help="slack: the incoming webhook URL")
    add_format_option(notify)
    notify.set_defaults(handler=set_notifications)
