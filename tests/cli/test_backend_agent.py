"""`osmo backend-agent` runs the agent (its own program, so the CLI imports nothing above
`osmo`), which needs no database settings: without a usable kubeconfig it says so and exits 2."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.kube_real.agent import SERVICE_ONLY


def test_the_command_runs_the_agent_without_database_settings(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_ONLY}
    done = subprocess.run([sys.executable, "-m", "osmo.cli.main", "backend-agent", "--url",
                           "http://127.0.0.1:9", "--token", "t", "--name", "east",
                           "--kubeconfig", str(kubeconfig)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "agent east: starting" in done.stderr
    assert "agent east: no usable kubeconfig" in done.stderr


def test_the_command_needs_its_arguments():
    done = subprocess.run([sys.executable, "-m", "osmo.cli.main", "backend-agent"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--url" in done.stderr and "--token" in done.stderr and "--name" in done.stderr


def test_the_token_may_come_from_the_environment_and_stays_off_the_command_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_ONLY}
    env["OSMO_AGENT_TOKEN"] = "secret-token"
    done = subprocess.run([sys.executable, "-c", (
        "import os, sys; from osmo.cli import backend_agent as b; import argparse;"
        "p = argparse.ArgumentParser(); b.build_parser(p);"
        "os.execv = lambda path, argv: print(' '.join(argv)) or sys.exit(0);"
        "b.run(p.parse_args(sys.argv[1:]))"), "--url", "http://127.0.0.1:9", "--name", "east",
        "--kubeconfig", str(kubeconfig)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "secret-token" not in done.stdout and "--name east" in done.stdout
    done = subprocess.run([sys.executable, "-m", "scheduler.backends.agent.process", "--url",
                           "http://127.0.0.1:9", "--name", "east", "--kubeconfig",
                           str(kubeconfig)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr  # it parsed: the kubeconfig is what it lacks
    assert "agent east: no usable kubeconfig" in done.stderr
