"""Forks backend agents on request, the agent imported once: ``python -m
tests.kube_real.agent_forker LOG ARGS...`` prints ``ready``, then for every ``start`` line on
its standard input forks an agent with ARGS (its output appended to LOG) and prints its PID.
Its children are reaped as they end; it exits when its standard input closes."""

from __future__ import annotations

import os
import signal
import sys

from scheduler.backends.agent.process.main import main


def serve(log: str, argv: list[str]) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # ended children are reaped by the kernel
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "start":
            continue
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            os._exit(main(argv))
        print(pid, flush=True)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
