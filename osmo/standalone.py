"""`osmo standalone`: the whole product in one command.

Embedded PostgreSQL and an embedded Valkey broker (both from wheels), migrations, then the
production processes as children: gunicorn (web), Celery worker, Celery beat, and the scheduler
loop — or, with ``OSMO_CLUSTER_BACKEND=kubernetes``, the Kubernetes backend
(``run_k8s_backend``) in its place, so one command runs against a real cluster too (the ready
line waits for the backend to reach the API server, as ``/api/health`` does). Their output
goes to stderr, so stdout carries only the ready line and the admin token. SIGINT/SIGTERM stop
every child and both embedded servers — the embedded PostgreSQL whatever other process
registered with it (a stale registration would otherwise keep it running for ever).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import embedded

STOP_GRACE_SECONDS = 15


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="osmo standalone")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--data-dir", default=str(embedded.data_dir()),
                        help="Where the embedded database and broker keep their data.")
    parser.add_argument("--demo", action=argparse.BooleanOptionalAction, default=False,
                        help="Seed demo pools, subpools and an admin.")
    parser.add_argument("--web-workers", type=int, default=2)
    return parser


class Standalone:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.data_dir = Path(args.data_dir).expanduser().resolve()
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.broker = None
        self.postgres_dir: Path | None = None  # set when standalone runs the embedded server
        self.stopping = False

    # --- start ------------------------------------------------------------------------------

    def prepare_environment(self) -> dict[str, str]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ["OSMO_DATA_DIR"] = str(self.data_dir)
        if not os.environ.get("DATABASE_URL"):
            self.postgres_dir = self.data_dir  # ours to stop on exit
        embedded.prepare_local_environment()
        broker_url = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL")
        if not broker_url:
            self.broker = embedded.start_broker(self.data_dir / "broker")
            broker_url = f"{self.broker.connection_url}/0"
        env = {
            "DATABASE_URL": os.environ["DATABASE_URL"],
            "REDIS_URL": broker_url,
            "CELERY_BROKER_URL": broker_url,
            "SECRET_KEY": os.environ.get("SECRET_KEY") or embedded.local_secret_key(),
            "DJANGO_SETTINGS_MODULE": "osmo.settings",
            "STATIC_ROOT": str(self.data_dir / "static"),
            "OSMO_DATA_DIR": str(self.data_dir),
        }
        os.environ.update(env)
        return dict(os.environ)

    def setup_database(self) -> str:
        """Migrate, collect static files, seed the demo if asked; return an admin token."""
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        from osmo.accounts import services as accounts

        if self.args.demo:
            from osmo.demo import seed_demo

            seed_demo()
        admin = accounts.user_ensure(username="admin", superuser=True, groups=["osmo-admin"])
        token = accounts.token_issue(user=admin)
        from django.db import connections

        connections.close_all()  # children open their own connections
        return token

    def spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        process = subprocess.Popen(argv, env=env, stdout=sys.stderr, stderr=sys.stderr,
                                   start_new_session=True)
        self.children.append((name, process))

    def start_children(self, env: dict[str, str]) -> None:
        python = sys.executable
        bind = f"{self.args.host}:{self.args.port}"
        self.spawn("web", [python, "-m", "gunicorn", "osmo.wsgi:application", "--bind", bind,
                           "--workers", str(self.args.web_workers), "--threads", "4",
                           "--timeout", "120", "--graceful-timeout", "10"], env)
        self.spawn("worker", [python, "-m", "celery", "-A", "osmo", "worker", "--loglevel",
                              "INFO", "--concurrency", "2", "--without-gossip",
                              "--without-mingle"], env)
        self.spawn("beat", [python, "-m", "celery", "-A", "osmo", "beat", "--loglevel", "INFO",
                            "--schedule", str(self.data_dir / "celerybeat-schedule")], env)
        manage = Path(__file__).resolve().parent.parent / "manage.py"
        from django.conf import settings

        if settings.OSMO_CLUSTER_BACKEND == "kubernetes":
            # KAI places the pods and the kubelet runs them: the backend dispatches, watches
            # and cleans up (the embedded scheduling loop would place nothing).
            self.spawn("k8s-backend", [python, str(manage), "run_k8s_backend"], env)
        elif _has_command("run_scheduler"):
            self.spawn("scheduler", [python, str(manage), "run_scheduler"], env)

    def wait_until_ready(self, timeout: float = 120) -> None:
        url = f"http://{self.args.host}:{self.args.port}/api/health"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_children()
            try:
                with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the web server did not become healthy at {url}")

    def check_children(self) -> None:
        for name, process in self.children:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with code {process.returncode}")

    # --- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        for _, process in self.children:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for _, process in self.children:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self.broker is not None:
            self.broker.stop()
        if self.postgres_dir is not None:
            embedded.stop_postgres(self.postgres_dir)

    def run(self) -> int:
        def on_signal(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, on_signal)
        try:
            env = self.prepare_environment()
            token = self.setup_database()
            self.start_children(env)
            self.wait_until_ready()
            print(f"OSMO ready: http://{self.args.host}:{self.args.port}/", flush=True)
            print(f"token: {token}", flush=True)
            while True:
                self.check_children()
                time.sleep(0.5)
        except KeyboardInterrupt:
            return 0
        except RuntimeError as error:
            print(f"osmo standalone: {error}", file=sys.stderr, flush=True)
            return 1
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.stop()


def _has_command(name: str) -> bool:
    from django.core.management import get_commands

    return name in get_commands()


def main(argv: list[str] | None = None) -> int:
    return Standalone(build_parser().parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
