"""Reading the process trees the tests start."""

from __future__ import annotations

import psutil


def command_lines(processes: list[psutil.Process]) -> list[tuple[psutil.Process, str]]:
    """(process, command line) of those still alive: a short-lived child (a database helper)
    may end, or be a zombie not yet reaped, between the listing and the read."""
    lines = []
    for process in processes:
        try:
            lines.append((process, " ".join(process.cmdline())))
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return lines
