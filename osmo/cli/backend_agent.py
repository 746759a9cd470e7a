"""`osmo backend-agent`: serve one Kubernetes backend by dialing out to the service.

The agent is the scheduler's (`scheduler/backends/agent/process/`), above this package in the
apps' direction, so the command runs it as its own program (`python -m`) with the same
arguments instead of importing it."""

from __future__ import annotations

import argparse
import os
import sys

AGENT_MODULE = "scheduler.backends.agent.process"


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="the service's URL")
    parser.add_argument("--token", default=os.environ.get("OSMO_AGENT_TOKEN") or None,
                        required=not os.environ.get("OSMO_AGENT_TOKEN"),
                        help="a token of a user in osmo-backend-NAME (or osmo-backend); "
                             "default: $OSMO_AGENT_TOKEN (not on the command line, where "
                             "every local user can read it)")
    parser.add_argument("--name", required=True, help="the backend this agent serves")
    parser.add_argument("--kubeconfig", default=None,
                        help="the cluster's kubeconfig (default: the pod's service account)")
    parser.add_argument("--identity", default=None,
                        help="this agent's identity for the backend's lease (default: "
                             "$OSMO_AGENT_IDENTITY, else random per start)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    argv = [sys.executable, "-m", AGENT_MODULE, "--url", args.url, "--name", args.name]
    if args.token != os.environ.get("OSMO_AGENT_TOKEN"):  # else the agent reads it there
        argv += ["--token", args.token]
    if args.kubeconfig:
        argv += ["--kubeconfig", args.kubeconfig]
    if args.identity:
        argv += ["--identity", args.identity]
    os.execv(sys.executable, argv)
    return 0  # not reached: the agent replaced this process
