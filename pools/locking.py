"""The pool-family lock: fair queueing between admissions and quota changes.

Admissions lock the pool rows FOR SHARE so they run side by side; quota changes lock them FOR
UPDATE. On row locks alone a steady stream of admissions can starve a quota change (PostgreSQL
lets a new share locker join a row that is already share-locked, ahead of a waiting writer). A
transaction-scoped advisory lock on the top-level pool, taken first, queues them fairly: a
waiting writer holds back later admissions until it has had its turn.
"""

from __future__ import annotations

from django.db import connection

POOL_FAMILY_LOCK = 0x05_0011  # advisory lock class: one key per top-level pool id


def lock_pool_family(parent_pk: int, *, shared: bool) -> None:
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s::int)", [POOL_FAMILY_LOCK, parent_pk])

