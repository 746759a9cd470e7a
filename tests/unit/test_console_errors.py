"""A quiet standalone's console gets the error lines of its processes' log files, nothing else."""

from __future__ import annotations

import io
from pathlib import Path

from osmo.console_errors import ConsoleErrors


def test_only_error_lines_reach_the_console_once_each_and_whole(tmp_path: Path):
    web, worker = tmp_path / "web.log", tmp_path / "worker.log"
    web.write_bytes(b"2026-01-01 00:00:00,000 ERROR before: written before the watch\n")
    console = io.StringIO()
    errors = ConsoleErrors(console)
    errors.watch(web)
    errors.watch(worker)  # not there yet
    with web.open("ab") as log:
        log.write(b"2026-01-01 00:00:01,000 INFO osmo.request: GET /api/whoami 200\n"
                  b"2026-01-01 00:00:02,000 ERROR django.request: Internal Server Error: /api/x\n"
                  b"Traceback (most recent call last):\n"
                  b"[2026-01-01 00:00:03 +0000] [42] [CRITICAL] WORKER TIMEOUT (pid:43)\n"
                  b'{"level": "ERROR", "logger": "osmo", "message": "js')
    worker.write_bytes(b"[2026-01-01 00:00:04: ERROR/MainProcess] consumer: Cannot connect\n"
                       b"celery@host ready. ERRORS none\n")
    errors.poll()
    assert console.getvalue().splitlines() == [
        "osmo standalone: web.log: 2026-01-01 00:00:02,000 ERROR django.request: Internal "
        "Server Error: /api/x",
        "osmo standalone: web.log: [2026-01-01 00:00:03 +0000] [42] [CRITICAL] WORKER TIMEOUT "
        "(pid:43)",
        "osmo standalone: worker.log: [2026-01-01 00:00:04: ERROR/MainProcess] consumer: "
        "Cannot connect"]
    with web.open("ab") as log:
        log.write(b'on"}\n')  # the rest of the half-written JSON line
    errors.poll()
    errors.poll()
    assert console.getvalue().splitlines()[3:] == [
        'osmo standalone: web.log: {"level": "ERROR", "logger": "osmo", "message": "json"}']
