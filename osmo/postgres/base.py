"""Django's PostgreSQL backend, with a persistent connection's per-request health check made
without a round trip.

``CONN_HEALTH_CHECKS`` makes Django send ``SELECT 1`` before the first query of every request
that reuses a connection: on a short request (a submission is three statements and a commit)
that is one round trip in five. A connection the server ended (a restart, a terminated backend,
a dead postmaster) has its socket readable — the server's last message or the end of the stream
— while a healthy idle one has nothing to read, so an idle, quiet socket passes at once; anything
else gets Django's own check (``SELECT 1``), which closes a dead connection before it is used.

Parameters are bound on the server (``server_side_binding``, see settings). Django then wraps an
integer field's value in its column's type (``Int2``/``Int4``/``Int8``), which psycopg writes in
binary form — and a number beyond that type is written truncated (2**32 + 5 as 5), or refused
with Python's ``OverflowError``. A value that does not fit is sent as a plain integer instead:
the server refuses storing it (``DataError``, the contract's 400) and no row equals it, as with
values written into the statement's text.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base, operations
from psycopg import pq
from psycopg.types import numeric

LIMITS = {numeric.Int2: 2**15, numeric.Int4: 2**31, numeric.Int8: 2**63}


class DatabaseOperations(operations.DatabaseOperations):
    def adapt_integerfield_value(self, value, internal_type):
        adapted = super().adapt_integerfield_value(value, internal_type)
        limit = LIMITS.get(type(adapted))
        if limit is not None and not -limit <= value < limit:
            return int(value)
        return adapted


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def close_if_health_check_failed(self) -> None:
        if (self.connection is None or not self.health_check_enabled
                or self.health_check_done):
            return
        if not (idle_and_quiet(self.connection) or self.is_usable()):
            self.close()
        self.health_check_done = True


def idle_and_quiet(connection) -> bool:
    """Open, outside any transaction, and nothing from the server waiting to be read."""
    if connection.closed or connection.broken:
        return False
    pgconn = connection.pgconn
    if pgconn.status != pq.ConnStatus.OK or (
            pgconn.transaction_status != pq.TransactionStatus.IDLE):
        return False
    poller = select.poll()
    try:
        poller.register(pgconn.socket, select.POLLIN)
    except (OSError, ValueError):
        return False
    return not poller.poll(0)
