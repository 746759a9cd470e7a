"""`osmo standalone`: the whole product in one command, supervised.

Embedded PostgreSQL and an embedded Valkey broker (both from wheels), migrations, then the
production processes as children: gunicorn (web), Celery worker, Celery beat, and the scheduler
loop — or, with ``OSMO_CLUSTER_BACKEND=kubernetes``, a backend agent for the `default` backend
in its place (``osmo backend-agent`` for that kubeconfig, with a token of a user in
``osmo-backend-default`` kept in ``<data dir>/agent-token`` and none of the service's database
or broker settings), so one command runs against a real cluster too, served as a second
cluster would be (the ready line waits for the agent to connect, as ``/api/health`` does).
Their output goes to log files under ``<data dir>/logs/`` (``--verbose``: to stderr), so the
console shows only the ready line, the admin token and what goes wrong (a child that exits,
with its log's last line; a line logged at ERROR or CRITICAL: :mod:`osmo.console_errors`).
The admin token
is kept in ``<data dir>/admin-token`` and the same one is printed at every start; it is
replaced (and every other standalone admin token revoked) only once revoked.

It is a supervisor (:mod:`osmo.supervisor`): the Valkey server and every child run under it,
in its process group, and end with it even when it is killed with SIGKILL; a child that exits
is restarted with backoff (one line on stderr each time) while the rest keeps serving. The
embedded PostgreSQL runs detached (it outlives a SIGKILL of standalone, and the next run joins
it) and is watched: killed, it is started again on the same socket, and requests meanwhile get
503 `database_unavailable` with nothing written. It binds
the web port itself and hands the socket to gunicorn, so a port already taken stops it before
anything starts, and a restarted web server never races for the port. SIGINT/SIGTERM stop every
child and both embedded servers — the embedded PostgreSQL whatever other process registered
with it (a stale registration would otherwise keep it running for ever). One standalone at a
time uses a data folder; the next one on it ends what a killed predecessor left behind and
joins (or starts) its PostgreSQL.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import shutil
import signal
import socket
import sys
import time
import urllib.request
from pathlib import Path

from . import bootstrap, embedded
from .console_errors import ConsoleErrors
from .supervisor import Child, Supervisor, Watched, end_leftovers

STOP_GRACE_SECONDS = 15
ADMIN_TOKEN_FILE = "admin-token"
ADMIN_TOKEN_NAME = "standalone"
AGENT_TOKEN_FILE = "agent-token"
AGENT_USER = "standalone-agent"
AGENT_BACKEND = "default"
# What the agent must not hold: the service's database, broker and keys.
SERVICE_ONLY = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY",
                "OSMO_CREDENTIAL_KEYS", "DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR",
                "OSMO_DATA_DIR")
LISTEN_BACKLOG = 2048


class StartupError(RuntimeError):
    """Standalone cannot start: said on stderr, exit code 1."""


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="osmo standalone")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--data-dir", default=str(embedded.data_dir()),
                        help="Where the embedded database and broker keep their data.")
    parser.add_argument("--demo", action=argparse.BooleanOptionalAction, default=False,
                        help="Seed demo pools, subpools and an admin.")
    parser.add_argument("--verbose", action="store_true",
                        help="The processes' output (Celery banners, one line per request) "
                             "on stderr, instead of in files under <data dir>/logs/.")
    parser.add_argument("--web-workers", type=int, default=None,
                        help="gunicorn worker processes (default: one per CPU, at least 2; "
                             "see osmo.capacity).")
    return parser


class Standalone:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.data_dir = Path(args.data_dir).expanduser().resolve()
        self.supervisor = Supervisor(name="osmo standalone", adopt_orphans=True,
                                     state_path=self.data_dir / "standalone.pids")
        self.listener: socket.socket | None = None
        self.lock_file = None
        self.postgres_dir: Path | None = None  # set when standalone runs the embedded server
        self.stopping = False
        self.console_errors = ConsoleErrors(sys.stderr)
        self.agent_token: str | None = None  # with a cluster: its agent's

    # --- start ------------------------------------------------------------------------------

    def claim_data_dir(self) -> None:
        """One standalone per data folder; end what a killed predecessor left running."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.lock_file = (self.data_dir / "standalone.lock").open("a+")
        try:
            fcntl.flock(self.lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock_file.close()
            self.lock_file = None
            raise StartupError(f"another osmo standalone is running on {self.data_dir}") from None
        # A killed run's broker name: commands beside this run must not join what answers there.
        embedded.broker_address_file(self.data_dir).unlink(missing_ok=True)
        left = end_leftovers(self.data_dir / "standalone.pids")
        if left:
            print(f"osmo standalone: ended {len(left)} processes a previous run left behind",
                  file=sys.stderr, flush=True)

    def bind(self) -> None:
        """Listen on the web address now: a taken port fails here, before anything starts."""
        host, port = self.args.host, self.args.port
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
            listener = socket.socket(family, kind, proto)
        except OSError as error:
            raise StartupError(f"cannot listen on {host}:{port}: {error}") from None
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(LISTEN_BACKLOG)
        except OSError as error:
            listener.close()
            reason = ("the port is already in use" if error.errno == errno.EADDRINUSE
                      else str(error))
            raise StartupError(f"cannot listen on {host}:{port}: {reason}") from None
        self.listener = listener
        self.args.port = listener.getsockname()[1]  # --port 0: the one the system chose

    def prepare_environment(self) -> dict[str, str]:
        os.environ["OSMO_DATA_DIR"] = str(self.data_dir)
        if bootstrap.metrics():
            # Prometheus' multiprocess mode: every child writes its samples here and the web
            # tier's /metrics merges them; emptied at each start (osmo.observability.metrics).
            metrics_dir = self.data_dir / "metrics"
            shutil.rmtree(metrics_dir, ignore_errors=True)
            metrics_dir.mkdir()
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        if self.args.web_workers:  # the database's connections are sized from it too
            os.environ["OSMO_WEB_WORKERS"] = str(self.args.web_workers)
        if not os.environ.get("DATABASE_URL"):
            self.postgres_dir = self.data_dir  # ours to stop on exit
        embedded.prepare_local_environment()
        if self.postgres_dir is not None:
            directory = self.postgres_dir
            self.supervisor.watch(Watched("postgres", lambda: embedded.postgres_pid(directory),
                                          lambda: embedded.restart_postgres(directory)))
        broker_url = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL")
        if not broker_url:
            broker_url = f"redis://127.0.0.1:{self.start_broker()}/0"
        env = {
            "DATABASE_URL": os.environ["DATABASE_URL"],
            "REDIS_URL": broker_url,
            "CELERY_BROKER_URL": broker_url,
            "SECRET_KEY": os.environ.get("SECRET_KEY") or embedded.local_secret_key(),
            "OSMO_CREDENTIAL_KEYS": (bootstrap.credential_keys()
                                     or embedded.local_credential_key()),
            "DJANGO_SETTINGS_MODULE": "osmo.settings",
            "STATIC_ROOT": str(self.data_dir / "static"),
            "OSMO_DATA_DIR": str(self.data_dir),
        }
        os.environ.update(env)
        return dict(os.environ)

    def start_broker(self, timeout: float = 20) -> int:
        """The embedded Valkey server as a supervised child, restarted on the same port."""
        directory = self.data_dir / "broker"
        port = embedded.free_port()
        self.supervisor.start(Child("broker", embedded.broker_command(directory, port),
                                    log_path=directory / "valkey.log", cwd=directory,
                                    stop_last=True))
        deadline = time.monotonic() + timeout
        while not embedded.broker_ready("127.0.0.1", port):
            self.supervisor.poll()
            if time.monotonic() > deadline:
                raise StartupError(f"the embedded broker did not start (see {directory}/"
                                   "valkey.log)")
            time.sleep(0.05)
        embedded.broker_address_file(self.data_dir).write_text(f"127.0.0.1:{port}\n")
        return port

    def setup_database(self) -> str:
        """Migrate, collect static files, seed the demo if asked; return an admin token."""
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        from osmo.accounts import services as accounts

        if self.args.demo:
            from scheduler.backends.embedded.demo import seed_demo

            seed_demo()
        admin = accounts.user_ensure(username="admin", superuser=True, groups=["osmo-admin"])
        token = self.kept_token(admin, ADMIN_TOKEN_FILE, "printed by osmo standalone")
        from scheduler.backends.spec import default_spec

        if default_spec().is_kubernetes:  # the agent's: that backend only, nothing else
            agent = accounts.user_ensure(username=AGENT_USER,
                                         groups=[f"osmo-backend-{AGENT_BACKEND}"])
            self.agent_token = self.kept_token(agent, AGENT_TOKEN_FILE,
                                               "the agent osmo standalone runs")
        from django.db import connections

        connections.close_all()  # children open their own connections
        return token

    def kept_token(self, user, file_name: str, description: str) -> str:
        """The user's standalone token, kept in ``file_name``: the same one at every start
        while it is live, a new one (the old revoked) once it is not."""
        from osmo.accounts import services as accounts

        token_file = self.data_dir / file_name
        kept = token_file.read_text().strip() if token_file.exists() else None
        token = accounts.token_keep_one(user=user, name=ADMIN_TOKEN_NAME, raw=kept,
                                        description=description)
        if token != kept:
            _write_private(token_file, token + "\n")
        return token

    def spawn(self, name: str, argv: list[str], env: dict[str, str],
              pass_fds: tuple[int, ...] = ()) -> None:
        log_path = None if self.args.verbose else self.logs_dir / f"{name}.log"
        if log_path is not None:
            self.console_errors.watch(log_path)
        self.supervisor.start(Child(name, argv, env=env, pass_fds=pass_fds, log_path=log_path))

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    def rotate_logs(self) -> None:
        """Each start begins its processes' logs afresh; the previous run's stay as `*.log.1`."""
        self.logs_dir.mkdir(exist_ok=True)
        for log in self.logs_dir.glob("*.log"):
            log.replace(log.with_name(log.name + ".1"))

    def start_children(self, env: dict[str, str]) -> None:
        python = sys.executable
        listener = self.listener.fileno()
        self.spawn("web", [python, "-m", "gunicorn", "osmo.wsgi:application",
                           "--config", "python:osmo.gunicorn_config", "--bind", f"fd://{listener}",
                           *(["--workers", str(self.args.web_workers)] if self.args.web_workers
                             else []), "--timeout", "120", "--graceful-timeout", "10"], env,
                   pass_fds=(listener,))
        self.spawn("worker", [python, "-m", "celery", "-A", "osmo", "worker", "--loglevel",
                              "INFO", "--without-gossip",
                              "--without-mingle"], env)
        self.spawn("beat", [python, "-m", "celery", "-A", "osmo", "beat", "--loglevel", "INFO",
                            "--schedule", str(self.data_dir / "celerybeat-schedule")], env)
        manage = Path(__file__).resolve().parent.parent / "manage.py"
        from scheduler.backends.spec import default_spec

        spec = default_spec()
        if spec.is_kubernetes:
            # The cluster is served as any other: by an agent dialing in, with the service's
            # URL and its token only (no database or broker settings in its environment).
            agent_env = {k: v for k, v in env.items() if k not in SERVICE_ONLY}
            agent_env["OSMO_AGENT_TOKEN"] = self.agent_token
            self.spawn("agent", [python, "-m", "scheduler.backends.agent.process",
                                 "--url", self.local_url, "--name", AGENT_BACKEND,
                                 "--identity", AGENT_USER,
                                 *(["--kubeconfig", spec.kubeconfig] if spec.kubeconfig
                                   else [])], agent_env)
        elif _has_command("run_scheduler"):
            self.spawn("scheduler", [python, str(manage), "run_scheduler"], env)

    @property
    def local_url(self) -> str:
        """The web server's URL from this machine (a wildcard address answers on loopback)."""
        host = self.args.host
        host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, host)
        return f"http://{host}:{self.args.port}"

    def wait_until_ready(self, timeout: float = 120) -> None:
        # Healthy: the database, the broker and, with a cluster, its agent connected.
        url = f"{self.local_url}/api/health"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.supervisor.poll()
            self.console_errors.poll()
            try:
                with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        restarts = self.supervisor.last_exits()
        raise StartupError(f"the web server did not become healthy at {url}"
                           + (f" ({restarts})" if restarts else "")
                           + ("" if self.args.verbose else
                              f"; see {self.logs_dir}/web.log"
                              + (" and agent.log" if self.agent_token else "")))

    # --- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        try:
            if self.lock_file is not None:  # ours: not a refused second standalone's
                embedded.broker_address_file(self.data_dir).unlink(missing_ok=True)
            self.supervisor.stop(STOP_GRACE_SECONDS)
        finally:
            if self.listener is not None:
                self.listener.close()
            if self.postgres_dir is not None:
                embedded.stop_postgres(self.postgres_dir)
            if self.lock_file is not None:
                self.lock_file.close()

    def run(self) -> int:
        def on_signal(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, on_signal)
        # Also when started with SIGINT ignored (a script's `&` job): its children do not
        # ignore it, and a Ctrl-C would end them one by one while this restarts them.
        signal.signal(signal.SIGINT, on_signal)
        try:
            self.claim_data_dir()
            self.bind()
            env = self.prepare_environment()
            token = self.setup_database()
            self.rotate_logs()
            self.start_children(env)
            self.wait_until_ready()
            print(f"OSMO ready: http://{self.args.host}:{self.args.port}/", flush=True)
            print(f"token: {token}", flush=True)
            print(f"(the admin token, the same at every start: {self.data_dir / ADMIN_TOKEN_FILE}"
                  + ("" if self.args.verbose else f"; logs: {self.logs_dir}/") + ")", flush=True)
            while True:
                self.supervisor.poll()
                self.console_errors.poll()
                time.sleep(0.2)
        except KeyboardInterrupt:
            return 0
        except RuntimeError as error:  # StartupError, or settings refusing the environment
            print(f"osmo standalone: {error}", file=sys.stderr, flush=True)
            return 1
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.stop()


def _write_private(path: Path, text: str) -> None:
    """Write a secret readable by its owner only, never half written."""
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(text)
    os.replace(temporary, path)


def _has_command(name: str) -> bool:
    from django.core.management import get_commands

    return name in get_commands()


def main(argv: list[str] | None = None) -> int:
    return Standalone(build_parser().parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
