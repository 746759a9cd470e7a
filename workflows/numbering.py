"""Workflow numbers taken as a sequence gives them: committed at once, on a connection of their
own, instead of in the admitting transaction.

Taken in that transaction, the name counter's row stays locked until it commits, so every
submission of the same spec name waits for the one before it to finish its insert, its
response's Python and its commit's WAL flush. Here the row is locked for one statement.

What still holds:
- a refused submission takes no number: admission takes one only once its checks passed;
- numbers are unique and, but for a submission that fails after its checks (a gap, as a
  sequence leaves), without gaps;
- a number survives a crash whenever a workflow bears it: the statement commits without
  waiting for its WAL flush (``synchronous_commit = off``), but the workflow's own commit
  flushes the WAL up to its record, and so the number's first;
- a caller's transaction keeps its numbers (its rollback returns them): inside one, admission
  numbers in its own insert, as before.

One connection per process (to the database the process's own connection is set to), used by
one thread at a time: a number is one short statement.
"""

from __future__ import annotations

import logging
import os
import threading

import psycopg
from django.db import connection

from osmo.postgres.base import idle_and_quiet

logger = logging.getLogger(__name__)

TAKE = ("INSERT INTO workflows_workflownamecounter (spec_name, value) VALUES (%s, 1) "
        "ON CONFLICT (spec_name) DO UPDATE SET value = workflows_workflownamecounter.value + 1 "
        "RETURNING value")
# A row held by a caller's open transaction (numbering inside it) is not waited for long: the
# admission then numbers in its own transaction instead.
LOCK_TIMEOUT = "1s"

_lock = threading.Lock()
_own: dict[str, object] = {"key": None, "connection": None}
_inherited: list = []


def take(spec_name: str) -> int | None:
    """The next number of ``spec_name``, committed; None if the numbering connection fails or
    the row stays locked (the caller then numbers in its own transaction)."""
    with _lock:
        try:
            return _connection().execute(TAKE, [spec_name]).fetchone()[0]
        except psycopg.errors.LockNotAvailable:
            return None
        except psycopg.Error:
            logger.warning("numbering connection failed: numbering in the transaction",
                           exc_info=True)
            close()
            return None


def _connection() -> psycopg.Connection:
    database = connection.settings_dict
    key = (os.getpid(), database["NAME"], database["HOST"], database["PORT"])
    own = _own["connection"]
    if own is not None and (_own["key"] != key or not idle_and_quiet(own)):
        close()  # another database, a forked child's copy, or ended by the server
        own = None
    if own is None:
        own = connection.get_new_connection(connection.get_connection_params())
        own.autocommit = True
        own.execute("SET synchronous_commit = off")
        own.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        _own.update(key=key, connection=own)
    return own


def close() -> None:
    """Close this process's numbering connection (a forked child only forgets its parent's)."""
    own, key = _own["connection"], _own["key"]
    _own.update(key=None, connection=None)
    if own is None:
        return
    if key[0] != os.getpid():
        _inherited.append(own)  # never closed nor collected here: that would end the parent's
        return
    try:
        own.close()
    except psycopg.Error:
        pass
