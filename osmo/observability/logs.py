"""Structured logs: ``OSMO_LOG_FORMAT=json`` writes one JSON object per line (time, level,
logger, message, and the request's id, user, pool, workflow, route, duration where known);
the default is plain text. The request middleware binds the request's fields for every line
logged while it is served; a log call adds its own with ``extra={"event": {...}}``."""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar, Token
from datetime import UTC, datetime

_context: ContextVar[dict | None] = ContextVar("osmo_log_context", default=None)


def bind(**fields) -> Token:
    """Add fields to every line logged in this context (until ``reset``)."""
    return _context.set({**(_context.get() or {}), **fields})


def reset(token: Token) -> None:
    _context.reset(token)


def current() -> dict:
    return dict(_context.get() or {})


class ContextFilter(logging.Filter):
    """Puts the bound fields on each record (``record.context``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.context = _context.get() or {}
        return True


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                    timespec="milliseconds").replace("+00:00", "Z"),
                "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        line.update(getattr(record, "context", None) or {})
        event = getattr(record, "event", None)
        if isinstance(event, dict):
            line.update(event)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """The default text lines, with a line's fields (``extra={"event": ...}``) and the
    request id appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = {**(getattr(record, "context", None) or {}),
                  **(getattr(record, "event", None) or {})}
        if not fields:
            return text
        return text + " " + " ".join(f"{key}={value}" for key, value in fields.items())
