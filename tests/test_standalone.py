"""`osmo standalone` end to end: one command, real processes, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from osmo.embedded import broker_address_file, free_port
from tests.processes import command_lines


def _work_dir() -> Path:
    # Not under pytest's tmp_path: another pytest session resets that root to mode 0700, which
    # the embedded PostgreSQL's own user (when run as root) then cannot traverse.
    return Path(tempfile.mkdtemp(prefix="osmo-standalone-test-"))


@pytest.fixture
def work_dir():
    directory = _work_dir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _get(url: str, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return response.status, json.loads(response.read())


@pytest.mark.timeout(240)
def test_standalone_runs_everything_and_stops_cleanly(work_dir: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    osmo = Path(sys.executable).with_name("osmo")
    log = work_dir / "standalone.log"
    process = subprocess.Popen(
        [str(osmo), "standalone", "--port", str(port), "--data-dir", str(work_dir / "data"),
         "--demo"], stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    try:
        ready = process.stdout.readline().strip()
        token_line = process.stdout.readline().strip()
        assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
        assert token_line.startswith("token: osmo_")
        token = token_line.removeprefix("token: ")
        descendants = psutil.Process(process.pid).children(recursive=True)
        names = " ".join(line for _, line in command_lines(descendants))
        assert "gunicorn" in names and "worker" in names and "beat" in names
        assert "valkey-server" in names or "valkey" in names
        assert "run_scheduler" in names

        assert _get(f"http://127.0.0.1:{port}/api/health") == (
            200, {"status": "ok", "database": "ok", "broker": "ok",
                  "backends": {"default": {"status": "ONLINE", "online": True,
                                           "heartbeat_age": None,
                                           "placement": {"ok": True, "missing": []}}}})
        status, report = _get(f"http://127.0.0.1:{port}/api/pool_quota", token)
        assert status == 200
        team = next(row for row in report["pools"] if row["name"] == "team")
        assert (team["total_quota_gpus"], team["quota_gpus"]) == (100, 10)
        status, nodes = _get(f"http://127.0.0.1:{port}/api/cluster/nodes", token)
        assert (len(nodes), sum(n["gpus"] for n in nodes)) == (32, 256)
        # The scheduler loop runs: a submitted workflow gets bound and runs.
        spec = ("workflow:\n  name: hello\n  tasks:\n  - {name: main, image: x, "
                "command: [sleep, '30'], resource: r}\n  resources:\n    r: {gpu: 1}\n")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/pool/team/workflow", method="POST",
            data=json.dumps({"file": spec}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            name = json.loads(response.read())["name"]
        deadline = time.monotonic() + 30
        while _get(f"http://127.0.0.1:{port}/api/workflow/{name}", token)[1][
                "status"] != "RUNNING":
            assert time.monotonic() < deadline, "the scheduler loop did not bind the workflow"
            time.sleep(0.5)
        postgres = [p for p in psutil.process_iter(["name", "cmdline"])
                    if p.info["name"] == "postgres"
                    and str(work_dir / "data") in " ".join(p.info["cmdline"] or [])]
        assert postgres, "the embedded PostgreSQL should run under the data folder"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    time.sleep(1)
    leftovers = [p for p in descendants + postgres if p.is_running()
                 and p.status() != psutil.STATUS_ZOMBIE]
    assert leftovers == []


def _postgres_of(data_dir: Path) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "postgres"
            and str(data_dir) in " ".join(p.info["cmdline"] or [])]


@pytest.mark.timeout(240)
def test_sigterm_stops_the_embedded_postgres_even_with_a_stale_registration(work_dir: Path):
    """A process that registered with the embedded PostgreSQL and died without unregistering
    (killed, say) must not keep it running after standalone stops."""
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    data = work_dir / "data"
    log = work_dir / "standalone.log"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("osmo")), "standalone", "--port", str(port),
         "--data-dir", str(data), "--no-demo", "--web-workers", "1"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    try:
        ready = process.stdout.readline().strip()
        assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
        postgres = _postgres_of(data)
        assert postgres
        handles = data / "pg" / ".handle_pids.json"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        handles.write_text(json.dumps([*json.loads(handles.read_text()), dead.pid]))
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    try:
        psutil.wait_procs(postgres, timeout=10)
        assert [p for p in postgres if p.is_running()] == [], "PostgreSQL kept running"
    finally:
        for leftover in _postgres_of(data):  # what this test started, by PID
            leftover.terminate()


# --- a supervisor that survives its own children ---------------------------------------------
#
# One standalone serves the fault tests below, in this order: each kill -9 of a child (the
# platform must serve again within RECOVERY_SECONDS, with nothing acknowledged lost), then
# kill -9 of standalone itself and a restart on the same data, then SIGTERM, which must stop
# everything — the embedded PostgreSQL too.

RECOVERY_SECONDS = 10
CHILD_KINDS = ("web", "worker", "beat", "scheduler", "broker")


def _standalone_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}


def _osmo_standalone(*args: str, log: Path, env: dict[str, str] | None = None,
                     new_session: bool = False, sigint=None) -> subprocess.Popen:
    """``sigint``: the disposition of SIGINT the standalone inherits (None: this process's)."""
    with log.open("a") as stderr:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("osmo")), "standalone", *args],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
            env={**_standalone_env(), **(env or {})}, start_new_session=new_session,
            preexec_fn=None if sigint is None else lambda: signal.signal(signal.SIGINT, sigint))


def _token_when_ready(process: subprocess.Popen, port: int, log: Path) -> str:
    ready = process.stdout.readline().strip()
    assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
    return process.stdout.readline().strip().removeprefix("token: ")


def _health(port: int, timeout: float = 5) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health",  # noqa: S310
                                    timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def _name(process: psutil.Process) -> str | None:
    try:
        return process.name()
    except psutil.Error:  # gone, or a zombie
        return None


def _still_running(processes: list[psutil.Process], timeout: float = 10) -> list[psutil.Process]:
    """Those of ``processes`` still running after ``timeout``. A zombie has ended: only its
    exit status waits to be read, by its parent or (orphaned) by init, neither the product."""
    def running(process: psutil.Process) -> bool:
        try:
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    return [process for process in psutil.wait_procs(processes, timeout=timeout)[1]
            if running(process)]


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {process.status()}: {' '.join(process.cmdline())}"
    except psutil.Error as error:
        return f"{process.pid}: {type(error).__name__}"


def _end(processes: list[psutil.Process]) -> None:
    """Kill what a test started and is still running (by pid), and wait for it."""
    alive = []
    for process in processes:
        try:
            process.kill()
            alive.append(process)
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=10)


class Platform:
    def __init__(self, directory: Path, port: int):
        self.data = directory / "data"
        self.log = directory / "standalone.log"
        self.port = port
        self.process: subprocess.Popen | None = None
        self.token = ""
        self.seen: list[psutil.Process] = []  # every process of every run, to end on failure

    def start(self, *args: str) -> None:
        self.process = _osmo_standalone("--port", str(self.port), "--data-dir", str(self.data),
                                        "--web-workers", "2", "--verbose", *args,
                                        log=self.log)  # the fault tests read the children
        self.seen.append(psutil.Process(self.process.pid))
        self.token = _token_when_ready(self.process, self.port, self.log)
        self.seen += self.tree()

    def tree(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def child(self, kind: str, started_after: float = 0) -> psutil.Process | None:
        """The supervised child of this kind (by its command line), or None. (The orphans of a
        killed gunicorn master are adopted by standalone until they end: they started before.)
        """
        for process in psutil.Process(self.process.pid).children():
            try:
                command = " ".join(process.cmdline())
                if process.create_time() < started_after:
                    continue
            except psutil.Error:
                continue
            if {"web": "gunicorn" in command,
                "worker": "celery" in command and " worker" in command,
                "beat": "celery" in command and " beat" in command,
                "scheduler": "run_scheduler" in command,
                "broker": "valkey-server" in command}[kind]:
                return process
        return None

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())

    def submit(self, name: str) -> str:
        spec = (f"workflow:\n  name: {name}\n  tasks:\n  - {{name: main, image: x, "
                "command: [sleep, '30'], resource: r}\n  resources:\n    r: {gpu: 1}\n")
        return self.request("POST", "/api/pool/team/workflow", {"file": spec})[1]["name"]

    def status(self, workflow: str) -> str:
        return self.request("GET", f"/api/workflow/{workflow}")[1]["status"]

    def broker(self, *command: str) -> bytes:
        """One command to the embedded broker, on the port its configuration names."""
        config = (self.data / "broker" / "valkey-supervised.conf").read_text()
        port = int(next(line.split()[1] for line in config.splitlines()
                        if line.startswith("port ")))
        request = f"*{len(command)}\r\n" + "".join(
            f"${len(part)}\r\n{part}\r\n" for part in command)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(request.encode())
            return connection.recv(1024)

    def log_count(self, text: str) -> int:
        return self.log.read_text(errors="replace").count(text)


@pytest.fixture(scope="module")
def platform():
    directory = _work_dir()
    platform = Platform(directory, free_port())
    try:
        platform.start("--demo")
        yield platform
    finally:
        if platform.process is not None and platform.process.poll() is None:
            platform.process.send_signal(signal.SIGTERM)
            try:
                platform.process.wait(60)
            except subprocess.TimeoutExpired:
                pass
        _end([process for process in platform.seen if process.is_running()])
        _end(_postgres_of(platform.data))
        shutil.rmtree(directory, ignore_errors=True)


def _report(capsys, what: str, seconds: float) -> None:
    with capsys.disabled():
        print(f"\n  {what}: {seconds:.2f} s", end="")


def test_a_second_standalone_on_the_same_data_is_refused(platform, work_dir: Path):
    log = work_dir / "second.log"
    second = _osmo_standalone("--port", str(free_port()), "--data-dir", str(platform.data),
                              log=log)
    try:
        assert second.wait(30) == 1
    finally:
        _end([psutil.Process(second.pid)] if second.poll() is None else [])
    assert second.stdout.read() == ""
    assert "another osmo standalone is running on" in log.read_text()
    assert _health(platform.port) == 200


def test_its_web_server_keeps_its_control_socket_in_its_data_folder(platform):
    """Not gunicorn's default, one path for every standalone of a user (and the test suite)."""
    sockets = {connection.laddr for connection in platform.child("web").net_connections("unix")}
    assert str(platform.data / "gunicorn.ctl") in sockets


def test_a_command_beside_it_queues_to_its_worker(platform):
    """`manage.py` on the same data folder joins the standalone's broker as it joins its
    PostgreSQL: a task the command queues is run by the standalone's worker."""
    queue = "from workflows.tasks import logs_purge; print(logs_purge.delay().id)"
    command = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent.parent / "manage.py"), "shell",
         "--no-imports", "-c", queue],
        env={**_standalone_env(), "OSMO_DATA_DIR": str(platform.data)},
        capture_output=True, text=True, timeout=120)
    assert command.returncode == 0, command.stderr
    done = f"workflows.tasks.logs_purge[{command.stdout.strip()}] succeeded"
    deadline = time.monotonic() + 30
    while platform.log_count(done) != 1:
        assert time.monotonic() < deadline, platform.log.read_text()[-3000:]
        time.sleep(0.2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", CHILD_KINDS)
def test_a_killed_child_is_restarted_and_nothing_is_lost(platform, kind: str, capsys):
    before = platform.submit(f"before-{kind}")
    if kind == "broker":  # a message the broker acknowledged survives its SIGKILL
        assert platform.broker("SET", f"acknowledged-{kind}", "kept") == b"+OK\r\n"
    victim = platform.child(kind)
    assert victim is not None, kind
    descendants = victim.children(recursive=True)
    workers_ready = platform.log_count(" ready.")
    beats_started = platform.log_count("beat: Starting...")
    after = None
    unhealthy = 0

    kill_time = time.time() - 0.05  # process start times are kept to the clock tick
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic()
    while True:
        replacement = platform.child(kind, started_after=kill_time)
        restarted = replacement is not None and replacement.pid != victim.pid
        # While gunicorn restarts the supervisor holds the socket: a connection waits in the
        # listen backlog instead of being refused, and is answered once the web is back — it
        # may wait as long as the recovery may take (on a loaded 2-core machine, more than 5 s).
        healthy = _health(platform.port, timeout=RECOVERY_SECONDS) == 200
        unhealthy += not healthy
        if restarted and healthy and kind == "scheduler" and after is None:
            after = platform.submit("after-scheduler")  # the new loop must place it
        if restarted and healthy and {
            "worker": platform.log_count(" ready.") > workers_ready,  # consuming again
            "beat": platform.log_count("beat: Starting...") > beats_started,
            "scheduler": after is not None and platform.status(after) == "RUNNING",
        }.get(kind, True):
            break
        assert time.monotonic() - killed < RECOVERY_SECONDS, (
            kind, restarted, healthy, platform.log.read_text()[-3000:])
        time.sleep(0.1)
    _report(capsys, f"serving again after kill -9 of {kind}", time.monotonic() - killed)

    assert platform.log_count(
        f"osmo standalone: {kind} exited with exit code -9 (SIGKILL); restarting in 1 s") == 1
    if kind != "broker":  # without its broker, health says so (503) until it is back
        assert unhealthy == 0, "the platform kept serving while the child restarted"
    assert platform.request("GET", f"/api/workflow/{before}")[1]["name"] == before
    if kind == "broker":
        assert platform.broker("GET", f"acknowledged-{kind}") == b"$4\r\nkept\r\n"
    # Its own processes (gunicorn's workers, the celery pool) went with it.
    assert _still_running(descendants) == []
    platform.seen += platform.tree()


@pytest.mark.timeout(120)
def test_a_killed_embedded_postgres_is_restarted_and_no_acknowledged_write_is_lost(platform,
                                                                                   capsys):
    """Submissions go on while the PostgreSQL server is killed: each is acknowledged (201) or
    refused (503, nothing written), and every acknowledged one is there afterwards."""
    import threading

    pid_file = platform.data / "pg" / "postmaster.pid"
    postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
    assert postmaster.name() == "postgres"
    acknowledged, refused, stop = [], [], threading.Event()

    def writer() -> None:
        number = 0
        while not stop.is_set():
            number += 1
            try:
                acknowledged.append(platform.submit(f"during-{number}"))
            except urllib.error.HTTPError as error:
                refused.append(error.code)
            except OSError:
                refused.append(None)
            time.sleep(0.05)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(acknowledged) < 3:
            time.sleep(0.05)
        postmaster.kill()
        killed = time.monotonic()
        while not refused:  # the outage was seen...
            assert time.monotonic() - killed < 30, "no request saw the outage"
            time.sleep(0.05)
        seen = len(acknowledged)
        while len(acknowledged) < seen + 3:  # ...and writes are acknowledged again
            assert time.monotonic() - killed < 60, platform.log.read_text()[-3000:]
            time.sleep(0.05)
        _report(capsys, "writing again after kill -9 of PostgreSQL", time.monotonic() - killed)
    finally:
        stop.set()
        thread.join(30)
    assert platform.log_count("osmo standalone: postgres exited; restarting in 1 s") == 1
    assert set(refused) <= {503}, refused  # database_unavailable, never a 500
    for name in acknowledged:
        assert platform.request("GET", f"/api/workflow/{name}")[1]["name"] == name
    assert _health(platform.port) == 200
    platform.seen += _postgres_of(platform.data)


@pytest.mark.timeout(120)
def test_kill_9_of_standalone_ends_its_tree_and_a_restart_serves_the_same_data(platform,
                                                                               capsys):
    before = platform.submit("before-parent")
    old_token = platform.token
    # The embedded PostgreSQL is not part of it, even once restarted by standalone: it outlives
    # the kill and the next run joins it.
    tree = [process for process in platform.tree() if _name(process) != "postgres"]
    assert {process.name() for process in tree} >= {"valkey-server"}

    platform.process.kill()
    killed = time.monotonic()
    platform.process.wait(10)
    alive = _still_running(tree)
    assert alive == [], [_describe(p) for p in alive]
    _report(capsys, "whole tree gone after kill -9 of standalone", time.monotonic() - killed)
    assert _postgres_of(platform.data), "PostgreSQL outlives a SIGKILL, the next run joins it"

    restarted = time.monotonic()
    platform.start("--no-demo")  # same data folder and port; the demo data is still there
    _report(capsys, "serving again after a restart on the same data",
            time.monotonic() - restarted)
    assert platform.request("GET", f"/api/workflow/{before}")[1]["name"] == before
    platform.token = old_token  # tokens live in the database: the old one still works
    assert platform.request("GET", f"/api/workflow/{before}")[1]["name"] == before
    handles = json.loads((platform.data / "pg" / ".handle_pids.json").read_text())
    assert handles == [platform.process.pid], "the killed run's registration was pruned"


@pytest.mark.timeout(120)
def test_sigterm_stops_every_process_and_the_embedded_postgres(platform):
    tree = platform.tree()
    postgres = _postgres_of(platform.data)
    assert tree and postgres
    platform.process.send_signal(signal.SIGTERM)
    assert platform.process.wait(60) == 0
    assert _still_running(tree + postgres) == []
    assert not broker_address_file(platform.data).exists(), "no command joins a stopped broker"


def test_a_taken_port_stops_start_up_before_ready(work_dir: Path):
    """Something else serves on the port (health checks would reach it): refuse to start."""
    import http.server
    import threading

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the name http.server calls
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"status": "ok"}')

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    log = work_dir / "standalone.log"
    try:
        process = _osmo_standalone("--port", str(port), "--data-dir", str(work_dir / "data"),
                                   log=log)
        try:
            assert process.wait(30) == 1
        finally:
            _end([psutil.Process(process.pid)] if process.poll() is None else [])
    finally:
        other.shutdown()
        other.server_close()
    assert "OSMO ready" not in process.stdout.read()
    assert f"cannot listen on 127.0.0.1:{port}: the port is already in use" in log.read_text()
    assert _postgres_of(work_dir / "data") == [], "nothing starts before the port is ours"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN], ids=["shell", "script"])
def test_ctrl_c_stops_every_process_and_the_embedded_postgres(work_dir: Path, inherited):
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group: here the
    standalone leads a group of its own, as a shell job does, and the group gets SIGINT. A
    script's `&` job starts with SIGINT ignored: the standalone stops all the same (its
    children would not ignore it, and would be restarted one by one)."""
    port, data, log = free_port(), work_dir / "data", work_dir / "standalone.log"
    process = _osmo_standalone("--port", str(port), "--data-dir", str(data), "--no-demo",
                               "--web-workers", "1", log=log, new_session=True,
                               sigint=inherited)
    tree: list[psutil.Process] = []
    try:
        _token_when_ready(process, port, log)
        tree = psutil.Process(process.pid).children(recursive=True) + _postgres_of(data)
        assert os.getpgid(process.pid) == process.pid
        assert {os.getpgid(child.pid) for child in tree if child.name() != "postgres"} == {
            process.pid}, "one process group"
        os.killpg(process.pid, signal.SIGINT)
        try:
            code = process.wait(60)
        except subprocess.TimeoutExpired:  # say what was still stopping, then fail
            alive = [f"{p.pid} {p.name()}" for p in _still_running(tree, timeout=0)]
            pytest.fail(f"standalone still running 60 s after SIGINT; alive: {alive}; "
                        f"log tail: {log.read_text()[-3000:]}")
        assert code == 0
        assert _still_running(tree) == []
        assert "restarting in" not in log.read_text(), "nothing is restarted while stopping"
    finally:
        _end([psutil.Process(process.pid)] if process.poll() is None else [])
        _end([p for p in tree if p.is_running()] + _postgres_of(data))


@pytest.mark.timeout(120)
def test_an_error_during_start_up_stops_the_embedded_postgres(work_dir: Path):
    data, log = work_dir / "data", work_dir / "standalone.log"
    process = _osmo_standalone("--port", str(free_port()), "--data-dir", str(data), log=log,
                               env={"OSMO_CLUSTER_BACKEND": "elsewhere"})
    try:
        assert process.wait(60) == 1
    finally:
        _end([psutil.Process(process.pid)] if process.poll() is None else [])
        leftover = _postgres_of(data)
        _end(leftover)
    assert "OSMO ready" not in process.stdout.read()
    assert "osmo standalone: OSMO_CLUSTER_BACKEND must be" in log.read_text()
    assert (data / "pg" / "PG_VERSION").exists(), "PostgreSQL had started"
    assert leftover == [], "and was stopped"


def test_stale_postgres_registrations_and_pid_files_are_pruned(work_dir: Path):
    """After a SIGKILL the registration list names dead processes (or is half written); the
    next start keeps only the live ones, so the last live one still stops the server."""
    from osmo.embedded import settle_postgres

    pgdata = work_dir / "pg"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("18\n")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    handles = pgdata / ".handle_pids.json"
    handles.write_text(json.dumps([os.getpid(), dead.pid]))
    assert settle_postgres(pgdata) == [dead.pid]
    assert json.loads(handles.read_text()) == [os.getpid()]
    handles.write_text("[12")
    assert settle_postgres(pgdata) == []
    assert json.loads(handles.read_text()) == []
    # A postmaster.pid naming a pid that now belongs to another program would block a start.
    postmaster = pgdata / "postmaster.pid"
    postmaster.write_text(f"{os.getpid()}\n{pgdata}\n1700000000\n5432\n{pgdata}\n\n"
                          "  1  2\nready\n")
    settle_postgres(pgdata)
    assert not postmaster.exists()


# --- the console and the admin token ---------------------------------------------------------

def _start_on_console(data: Path, port: int, console: Path) -> subprocess.Popen:
    """standalone with stdout and stderr on one file, as a terminal shows them."""
    with console.open("w") as stream:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("osmo")), "standalone", "--port", str(port),
             "--data-dir", str(data), "--no-demo", "--web-workers", "1"],
            stdout=stream, stderr=subprocess.STDOUT, text=True, env=_standalone_env())


def _console_when_ready(process: subprocess.Popen, console: Path) -> list[str]:
    deadline = time.monotonic() + 150
    while "token: " not in console.read_text() or not console.read_text().endswith(")\n"):
        assert process.poll() is None and time.monotonic() < deadline, console.read_text()
        time.sleep(0.2)
    return console.read_text().splitlines()


def _live_standalone_tokens(port: int, token: str) -> list[str]:
    status, tokens = _get(f"http://127.0.0.1:{port}/api/auth/access_token", token)
    assert status == 200
    return [row["prefix"] for row in tokens if row["name"] == "standalone"]


@pytest.mark.timeout(400)
def test_the_console_shows_the_ready_line_and_one_admin_token_kept_across_starts(work_dir):
    data, port = work_dir / "data", free_port()
    tokens = []
    for run in range(2):
        console = work_dir / f"console-{run}.txt"
        process = _start_on_console(data, port, console)
        try:
            lines = _console_when_ready(process, console)
            token = lines[1].removeprefix("token: ")
            for _ in range(5):  # requests log nothing on the console
                assert _get(f"http://127.0.0.1:{port}/api/whoami", token)[0] == 200
            time.sleep(1)
            assert console.read_text().splitlines() == lines == [
                f"OSMO ready: http://127.0.0.1:{port}/", f"token: {token}",
                f"(the admin token, the same at every start: {data / 'admin-token'}; "
                f"logs: {data / 'logs'}/)"]
            assert (data / "admin-token").read_text() == token + "\n"
            assert stat.S_IMODE((data / "admin-token").stat().st_mode) == 0o600
            assert _live_standalone_tokens(port, token) == [token[:12]]
            web_log = (data / "logs" / "web.log").read_text()
            assert web_log.count("/api/whoami") == 5  # one access line each, in the file
            # The worker's banner, once it has started: "ready" waits for /api/health, and
            # on a busy machine the worker can take some seconds more.
            worker_log, deadline = data / "logs" / "worker.log", time.monotonic() + 60
            while "celery@" not in worker_log.read_text():
                assert time.monotonic() < deadline, worker_log.read_text()
                time.sleep(0.2)
            tokens.append(token)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(60) == 0
    assert tokens[0] == tokens[1]
    assert (data / "logs" / "web.log.1").exists()  # the first run's, kept once


@pytest.mark.timeout(300)
def test_a_revoked_admin_token_is_replaced_and_the_file_follows(work_dir):
    data, port = work_dir / "data", free_port()
    console = work_dir / "console.txt"
    process = _start_on_console(data, port, console)
    try:
        first = _console_when_ready(process, console)[1].removeprefix("token: ")
        # What goes wrong still reaches the quiet console: a child killed, and where to look.
        scheduler = next(child for child in psutil.Process(process.pid).children()
                         if "run_scheduler" in " ".join(child.cmdline()))
        scheduler.kill()
        said = ("osmo standalone: scheduler exited with exit code -9 (SIGKILL); restarting in "
                f"1 s (restart 1); its output: {data / 'logs' / 'scheduler.log'}")
        deadline = time.monotonic() + 10
        while said not in console.read_text():
            assert time.monotonic() < deadline, console.read_text()
            time.sleep(0.2)
        subprocess.run(
            [sys.executable, str(Path(__file__).resolve().parent.parent / "manage.py"),
             "issue_token", "admin", "--revoke-all"],
            env={**_standalone_env(), "OSMO_DATA_DIR": str(data)}, check=True,
            capture_output=True, timeout=120)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    console = work_dir / "console-2.txt"
    process = _start_on_console(data, port, console)
    try:
        second = _console_when_ready(process, console)[1].removeprefix("token: ")
        assert second != first
        assert (data / "admin-token").read_text() == second + "\n"
        assert _live_standalone_tokens(port, second) == [second[:12]]
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(f"http://127.0.0.1:{port}/api/whoami", first)
        assert refused.value.code == 401
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
