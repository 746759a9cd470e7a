"""The kubelet's ``timestamps=true`` log lines, read apart from any model: the in-process
backend (``pod_logs``) and the agent, which has no database, both read them."""

from __future__ import annotations

import datetime as dt
import re

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z ")


def stamp_ns(line: str) -> tuple[int, dt.datetime] | None:
    """The kubelet's RFC 3339 timestamp of a ``timestamps=true`` line, in ns and as a time."""
    match = STAMP.match(line)
    if match is None:
        return None
    at = dt.datetime.fromisoformat(match[1]).replace(tzinfo=dt.UTC)
    fraction = int((match[2] or "0").ljust(9, "0"))
    return int(at.timestamp()) * 1_000_000_000 + fraction, at


def since_time(since_ns: int) -> str:
    """``sinceTime`` for a read resuming at ``since_ns`` (whole seconds: the lines of that
    second come again and are skipped by their stamps)."""
    since = dt.datetime.fromtimestamp(since_ns // 1_000_000_000, dt.UTC)
    return since.strftime("%Y-%m-%dT%H:%M:%SZ")
