"""Keyset positions for lists ordered by (a time, id): an opaque cursor names the row a page
starts after, so a deep page is read from the index where page 1 is, with no OFFSET to walk.

A cursor is base64url text of `v1|<order>|<direction>|<time>|<id>`: the order it was made for
(`A` oldest first, `D` newest first), its direction (`F` the rows after, `B` the rows before),
the time in microseconds since 1970 (`-`: a row without one, listed last) and the row's id."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import F, Q
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan

from osmo.errors import RequestInvalid

MAX_CURSOR_CHARS = 96  # a cursor is ~40 characters; anything longer is not one of ours
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TEXT = re.compile(r"v1\|([AD])\|([FB])\|(-|-?\d{1,17})\|(\d{1,19})")
_MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class Position:
    descending: bool  # the list's order: newest first
    forward: bool  # the rows after the position (else the rows before it)
    time: datetime | None
    id: int

    def encode(self) -> str:
        micros = "-" if self.time is None else str((self.time - EPOCH) // timedelta(
            microseconds=1))
        text = f"v1|{'D' if self.descending else 'A'}|{'F' if self.forward else 'B'}|" \
               f"{micros}|{self.id}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def refused(why: str) -> RequestInvalid:
    return RequestInvalid({"cursor": [why]})


def decode(cursor: str, *, descending: bool) -> Position:
    """The position a cursor names, for a list in this order; anything else is a 400."""
    if not cursor or len(cursor) > MAX_CURSOR_CHARS or not cursor.isascii():
        raise refused("Not a cursor this list gave.")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise refused("Not a cursor this list gave.") from None
    match = _TEXT.fullmatch(text)
    if match is None:
        raise refused("Not a cursor this list gave.")
    order, direction, micros, row_id = match.groups()
    if (order == "D") != descending:
        raise refused("The cursor was given for the other order: keep `order` as it was.")
    try:
        time = None if micros == "-" else EPOCH + timedelta(microseconds=int(micros))
    except OverflowError:
        raise refused("Not a cursor this list gave.") from None
    if int(row_id) > _MAX_ID:
        raise refused("Not a cursor this list gave.")
    return Position(descending, direction == "F", time, int(row_id))


def at_row(row, time_field: str, *, descending: bool, forward: bool) -> Position:
    return Position(descending, forward, getattr(row, time_field), row.pk)


def beyond(time_field: str, position: Position, *, id_descending: bool | None = None):
    """The rows past the position in the direction it reads, among those with a time (the
    rows without one are listed last, apart). Time and id ordered the same way: the row
    comparison `(time, id) > (t, i)`, which the index on (time, id) takes whole as its scan's
    start. Ordered apart: `time ≥ t AND (time > t OR id > i)` (mirrored as the order asks),
    so the scan starts at `t` and only the rows sharing that time are filtered."""
    later = position.descending != position.forward  # reading towards later times
    id_later = (position.descending if id_descending is None else id_descending) \
        != position.forward
    t, i = position.time, position.id
    if later == id_later:
        lookup = TupleGreaterThan if later else TupleLessThan
        return lookup(Tuple(F(time_field), F("pk")), (t, i))
    time_far = "gt" if later else "lt"
    time_from = "gte" if later else "lte"
    id_far = "gt" if id_later else "lt"
    return Q(**{f"{time_field}__{time_from}": t}) & (
        Q(**{f"{time_field}__{time_far}": t}) | Q(**{f"pk__{id_far}": i}))
