"""Django's PostgreSQL backend, with a persistent connection's per-request health check made
without a round trip.

``CONN_HEALTH_CHECKS`` makes Django send ``SELECT 1`` before the first query of every request
that reuses a connection: on a short request (a submission is three statements and a commit)
that is one round trip in five. A connection the server ended (a restart, a terminated backend,
a dead postmaster) has its socket readable — the server's last message or the end of the stream
— while a healthy idle one has nothing to read, so an idle, quiet socket passes at once; anything
else gets Django's own check (``SELECT 1``), which closes a dead connection before it is used.

Parameters are bound on the server (``server_side_binding``, see settings): Django then sends an
``IntegerField``'s value as a binary int4, which psycopg cannot write for a larger number and
refuses with Python's ``OverflowError`` before the server sees it. The cursor refuses it as the
server refuses an out-of-range value, so callers get the same ``DataError``.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import errors, pq


class ServerBindingCursor(base.ServerBindingCursor):
    def execute(self, query, params=None, **kwargs):
        try:
            return super().execute(query, params, **kwargs)
        except OverflowError as exc:
            raise errors.NumericValueOutOfRange("integer out of range") from exc

    def executemany(self, query, params_seq, **kwargs):
        try:
            return super().executemany(query, params_seq, **kwargs)
        except OverflowError as exc:
            raise errors.NumericValueOutOfRange("integer out of range") from exc


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict:
        params = super().get_connection_params()
        if params.get("cursor_factory") is base.ServerBindingCursor:
            params["cursor_factory"] = ServerBindingCursor
        return params

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
