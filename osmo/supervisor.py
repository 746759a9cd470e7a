"""Supervise child processes: restart a crashed one with backoff, end them all with the parent.

Every child starts through :mod:`osmo.parent_death`, so the kernel signals it when the
supervisor ends, even by SIGKILL. Children stay in the supervisor's process group (Ctrl-C in a
terminal reaches them all). With ``adopt_orphans`` (Linux) the supervisor is also a "child
subreaper": a process orphaned by a crashed child (a gunicorn worker whose master was killed,
say) is re-parented to the supervisor, which stops and reaps it, so a restarted child never
finds its predecessor's workers still holding a port. Every child of that process which the
supervisor did not start is then taken for an orphan, except the servers it watches
(:class:`Watched`: the embedded PostgreSQL, which runs detached and is adopted when it is
started again).

Spawn from the main thread only: the parent-death signal fires when the *thread* that forked
the child ends, not the process.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 30.0
STABLE_SECONDS = 60.0  # a child that ran this long starts over from the first delay
ORPHAN_GRACE_SECONDS = 5.0  # SIGTERM, then SIGKILL after this long

PR_SET_CHILD_SUBREAPER = 36
PARENT_DEATH_WRAPPER = Path(__file__).with_name("parent_death.py")


@dataclass
class Backoff:
    """Restart delays: the first delay, doubled after every quick crash up to the maximum; a
    run of at least `stable` seconds starts over."""

    first: float = FIRST_DELAY_SECONDS
    maximum: float = MAX_DELAY_SECONDS
    stable: float = STABLE_SECONDS
    next_delay: float = field(init=False)

    def __post_init__(self) -> None:
        self.next_delay = self.first

    def after_exit(self, uptime: float) -> float:
        if uptime >= self.stable:
            self.next_delay = self.first
        delay = self.next_delay
        self.next_delay = min(delay * 2, self.maximum)
        return delay


@dataclass
class Watched:
    """A server that runs detached from the supervisor (the embedded PostgreSQL: started by
    pg_ctl, it outlives a killed supervisor so that the next run joins it). It is watched by
    its pid and started again, with the same backoff, when it is gone."""

    name: str
    pid: Callable[[], int | None]  # its pid while it runs, else None
    start: Callable[[], None]  # raises while it cannot start
    backoff: Backoff = field(default_factory=Backoff)
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] | None = None
    pass_fds: tuple[int, ...] = ()
    log_path: Path | None = None  # None: the supervisor's stderr
    cwd: Path | None = None
    stop_last: bool = False  # stopped after the others (the broker they drain into)
    death_signal: int = signal.SIGTERM
    backoff: Backoff = field(default_factory=Backoff)
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


def _where_its_output_is(child: Child) -> str:
    """For a child whose output goes to a file: that file and its last line (the error)."""
    if child.log_path is None:
        return ""
    try:
        with child.log_path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
            lines = [line for line in log.read().decode(errors="replace").splitlines()
                     if line.strip()]
    except OSError:
        lines = []
    return f"; its output: {child.log_path}" + (f", ending: {lines[-1].strip()}" if lines
                                                 else "")


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def become_subreaper() -> bool:
    """Adopt the orphans of our descendants (Linux); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


class Supervisor:
    def __init__(self, *, name: str = "supervisor", log: IO[str] | None = None,
                 state_path: Path | None = None, adopt_orphans: bool = False,
                 clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.adopt_orphans = adopt_orphans
        self.log = log or sys.stderr
        self.state_path = state_path  # the children's pids, for the next run after a SIGKILL
        self.clock = clock
        self.children: list[Child] = []
        self.watched: list[Watched] = []
        self.orphans: dict[int, float] = {}  # pid -> when to SIGKILL it
        self.subreaper = False
        self.stopping = False

    # --- running ----------------------------------------------------------------------------

    def start(self, child: Child) -> Child:
        if self.adopt_orphans and not self.subreaper:
            self.subreaper = become_subreaper()
        self.children.append(child)
        self._spawn(child)
        return child

    def watch(self, server: Watched) -> Watched:
        server.started_at = self.clock()
        self.watched.append(server)
        return server

    def _spawn(self, child: Child) -> None:
        argv = [sys.executable, "-I", "-S", str(PARENT_DEATH_WRAPPER), str(os.getpid()),
                str(int(child.death_signal)), *child.argv]
        log = child.log_path.open("ab") if child.log_path is not None else None
        # A stop signal arriving between the fork and recording the child would leave it
        # unrecorded: hold SIGINT/SIGTERM until it is (the wrapper unblocks them in the child).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            child.process = subprocess.Popen(
                argv, env=child.env, cwd=child.cwd, pass_fds=child.pass_fds,
                stdin=subprocess.DEVNULL, stdout=log or self.log, stderr=log or self.log)
            child.started_at = self.clock()
            child.restart_at = None
            self._save_state()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            if log is not None:
                log.close()

    def poll(self) -> None:
        """One round: note exited children, restart those whose delay is over, reap orphans."""
        now = self.clock()
        for child in self.children:
            if child.process is not None:
                code = child.process.poll()
                if code is None or self.stopping:
                    continue
                delay = child.backoff.after_exit(now - child.started_at)
                child.process = None
                child.restart_at = now + delay
                child.restarts += 1
                print(f"{self.name}: {child.name} exited with {describe_exit(code)}; "
                      f"restarting in {delay:g} s (restart {child.restarts})"
                      + _where_its_output_is(child), file=self.log, flush=True)
            elif child.restart_at is not None and now >= child.restart_at and not self.stopping:
                try:
                    self._spawn(child)
                except OSError as error:  # out of processes or files, say: try again later
                    delay = child.backoff.after_exit(0)
                    child.restart_at = now + delay
                    print(f"{self.name}: {child.name} could not start ({error}); "
                          f"retrying in {delay:g} s", file=self.log, flush=True)
        for server in self.watched:
            if not self.stopping:
                self._poll_watched(server)
        self.reap_orphans()

    def _poll_watched(self, server: Watched) -> None:
        if server.restart_at is None:
            if server.pid() is None:
                now = self.clock()
                delay = server.backoff.after_exit(now - server.started_at)
                server.restart_at = now + delay
                server.restarts += 1
                print(f"{self.name}: {server.name} exited; restarting in {delay:g} s "
                      f"(restart {server.restarts})", file=self.log, flush=True)
        elif self.clock() >= server.restart_at:
            try:
                server.start()
            except Exception as error:  # noqa: BLE001 - any failure: try again later
                delay = server.backoff.after_exit(0)
                server.restart_at = self.clock() + delay
                print(f"{self.name}: {server.name} could not start ({error}); retrying in "
                      f"{delay:g} s", file=self.log, flush=True)
            else:
                server.started_at, server.restart_at = self.clock(), None

    def reap_orphans(self) -> None:
        """Stop and reap the processes adopted as a subreaper: debris of a crashed child."""
        if not self.subreaper:
            return
        now = self.clock()
        known = self._known_pids()
        try:
            adopted = psutil.Process().children()
        except psutil.Error:
            adopted = []
        for process in adopted:
            if process.pid not in known and process.pid not in self.orphans:
                self.orphans[process.pid] = now + ORPHAN_GRACE_SECONDS
                _signal(process.pid, signal.SIGTERM)
        for pid, kill_at in list(self.orphans.items()):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] == pid
            except ChildProcessError:
                done = True
            if done:
                del self.orphans[pid]
            elif now >= kill_at:
                _signal(pid, signal.SIGKILL)

    def _known_pids(self) -> set[int]:
        """Our children and the watched servers (a restarted one is re-parented to us)."""
        known = {child.pid for child in self.children if child.pid is not None}
        return known | {pid for server in self.watched if (pid := server.pid()) is not None}

    def running(self, name: str) -> bool:
        return any(child.name == name and child.process is not None
                   and child.process.poll() is None for child in self.children)

    def last_exits(self) -> str:
        return ", ".join(f"{child.name} restarted {child.restarts} times"
                         for child in [*self.children, *self.watched] if child.restarts)

    # --- stopping ---------------------------------------------------------------------------

    def stop(self, grace: float) -> None:
        """SIGTERM every child (the broker last), SIGKILL what outlives `grace`, reap orphans."""
        self.stopping = True
        for last in (False, True):
            group = [child for child in self.children if child.stop_last is last]
            running = [child.process for child in group
                       if child.process is not None and child.process.poll() is None]
            for process in running:
                _signal(process.pid, signal.SIGTERM)
            deadline = self.clock() + grace
            for process in running:
                try:
                    process.wait(max(0.1, deadline - self.clock()))
                except subprocess.TimeoutExpired:
                    kill_tree(process.pid)
                    process.wait()
            for child in group:
                child.process = None
                child.restart_at = None
        deadline = self.clock() + grace
        while self.orphans or (self.subreaper and {
                process.pid for process in psutil.Process().children()} - self._known_pids()):
            self.reap_orphans()
            if self.clock() >= deadline:
                for pid in list(self.orphans):
                    _signal(pid, signal.SIGKILL)
            if self.clock() >= deadline + 5:
                break
            time.sleep(0.1)
        if self.state_path is not None and self.children:
            self.state_path.unlink(missing_ok=True)

    # --- what a killed supervisor left behind -----------------------------------------------

    def _save_state(self) -> None:
        if self.state_path is None:
            return
        children = []
        for child in self.children:
            if child.process is None:
                continue
            try:
                children.append([child.process.pid, psutil.Process(child.process.pid)
                                 .create_time()])
            except psutil.Error:
                continue
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"supervisor": os.getpid(), "children": children}))
        temporary.replace(self.state_path)


def end_leftovers(state_path: Path, timeout: float = 15.0) -> list[int]:
    """End the children a killed supervisor recorded in `state_path`, and their descendants.

    They got their parent-death signal and are on their way out (a gunicorn finishing its
    requests): wait up to `timeout`, then SIGKILL. Returns the pids that were still running.
    """
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return []
    leftovers: list[psutil.Process] = []
    for pid, created in state.get("children", []):
        try:
            process = psutil.Process(pid)
            if abs(process.create_time() - created) > 0.5:
                continue  # the pid was reused by another process
            leftovers += [process, *process.children(recursive=True)]
        except psutil.Error:
            continue
    if leftovers:
        _, alive = psutil.wait_procs(leftovers, timeout=timeout)
        for process in alive:
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=5)
    state_path.unlink(missing_ok=True)
    return [process.pid for process in leftovers]


def kill_tree(pid: int) -> None:
    try:
        parent = psutil.Process(pid)
        processes = [parent, *parent.children(recursive=True)]
    except psutil.Error:
        return
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
