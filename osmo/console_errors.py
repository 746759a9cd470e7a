"""What of the processes' log files reaches the console of a quiet `osmo standalone`: the
lines logged at ERROR or CRITICAL (plain text, JSON or gunicorn's own format), each prefixed
with its file's name, so that a failure is seen without the noise around it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO

# "... ERROR logger: ..." (osmo's text lines), "level": "ERROR" (JSON), "[ERROR]" (gunicorn),
# "ERROR/MainProcess" (Celery's own).
ERROR_LINE = re.compile(r'(^|[\s\["])(ERROR|CRITICAL)([\s\]"/:]|$)')


class ConsoleErrors:
    def __init__(self, console: IO[str], prefix: str = "osmo standalone"):
        self.console = console
        self.prefix = prefix
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}

    def watch(self, path: Path) -> None:
        """Follow `path` from its current end (it may not exist yet)."""
        self.offsets[path] = path.stat().st_size if path.exists() else 0
        self.partial[path] = b""

    def poll(self) -> None:
        """Print the error lines written since the last poll (complete lines only)."""
        for path, offset in self.offsets.items():
            try:
                with path.open("rb") as log:
                    if log.seek(0, 2) < offset:  # truncated: from its start again
                        offset, self.partial[path] = 0, b""
                    log.seek(offset)
                    data = log.read(1 << 20)
            except FileNotFoundError:
                continue
            self.offsets[path] = offset + len(data)
            *lines, self.partial[path] = (self.partial[path] + data).split(b"\n")
            for line in lines:
                text = line.decode(errors="replace").rstrip()
                if ERROR_LINE.search(text):
                    print(f"{self.prefix}: {path.name}: {text}", file=self.console, flush=True)
