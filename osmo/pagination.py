"""Pagination with bounds: a page holds at most `max_limit` rows, and an offset beyond any
table is an empty page (not a database overflow)."""

from __future__ import annotations

import json

from django.db import connections
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.utils.urls import remove_query_param, replace_query_param

from osmo import keyset

MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`limit` and `offset` in anything but ASCII digits (int() reads '８' as 8) count as not
    given, as other text does."""

    max_limit = 1000

    def get_limit(self, request):
        if not request.query_params.get(self.limit_query_param, "").isascii():
            return self.default_limit
        return super().get_limit(request)

    def get_offset(self, request):
        if not request.query_params.get(self.offset_query_param, "").isascii():
            return 0
        return min(super().get_offset(request), MAX_OFFSET)


COUNT_BOUND = 1_000  # a count reads at most this + 1 rows: a few ms, whatever the history


class BoundedCountPagination(BoundedLimitOffsetPagination):
    """For lists over the whole history: `count` is exact up to COUNT_BOUND (a count of at most
    COUNT_BOUND + 1 rows), above it the planner's estimate with `count_is_estimate: true`;
    `next` comes from one row read past the page, not from the count."""

    def paginate_queryset(self, queryset, request, view=None):
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        self.offset = self.get_offset(request)
        rows = list(queryset[self.offset:self.offset + self.limit + 1])
        self.has_more = len(rows) > self.limit
        page = rows[:self.limit]
        self.bounded_count(queryset, seen=self.offset + len(page) + self.has_more)
        return page

    def bounded_count(self, queryset, *, seen: int) -> None:
        self.count = queryset.order_by()[:COUNT_BOUND + 1].count()
        self.count_is_estimate = self.count > COUNT_BOUND
        if self.count_is_estimate:
            self.count = max(planner_rows(queryset), seen, COUNT_BOUND + 1)

    def get_next_link(self):
        if not self.has_more:
            return None
        return super().get_next_link()

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        response.data["count_is_estimate"] = self.count_is_estimate
        return response

    def get_paginated_response_schema(self, schema):
        paginated = super().get_paginated_response_schema(schema)
        paginated["properties"]["count_is_estimate"] = {
            "type": "boolean", "description": "`count` is the planner's estimate (above "
                                              f"{COUNT_BOUND:,} rows), not an exact count."}
        paginated["required"] = [*paginated.get("required", ()), "count_is_estimate"]
        return paginated


class KeysetCountPagination(BoundedCountPagination):
    """BoundedCountPagination plus an opaque `cursor` (osmo/keyset.py) for a list ordered by
    (a time, id), both the same way: a cursor page reads from the index where page 1 does,
    however deep it is, and `next`/`previous` carry cursors. `offset` still pages as before
    (its cost grows with the offset)."""

    cursor_query_param = "cursor"

    def paginate_queryset(self, queryset, request, view=None):
        self.keyset_order = keyset_order(queryset)
        self.first = self.last = self.position = None
        raw = request.query_params.get(self.cursor_query_param)
        if raw is None:
            page = super().paginate_queryset(queryset, request, view)
            if page is None:
                return None
            if page and self.keyset_order:
                self.first, self.last = page[0], page[-1]
            self.has_before = self.offset > 0
            return page
        if self.keyset_order is None:
            raise keyset.refused("This list's order has no cursor.")
        if self.offset_query_param in request.query_params:
            raise keyset.refused("Give `cursor` or `offset`, not both.")
        self.request = request
        self.limit = self.get_limit(request) or self.default_limit
        self.offset = 0
        field, descending = self.keyset_order
        self.position = position = keyset.decode(raw, descending=descending)
        rows = queryset.filter(keyset.beyond(field, position))
        rows = list((rows if position.forward else rows.reverse())[:self.limit + 1])
        more = len(rows) > self.limit
        page = rows[:self.limit] if position.forward else rows[:self.limit][::-1]
        if page:
            self.first, self.last = page[0], page[-1]
        # One row read past each end: `next` and `previous` exactly when a row is there.
        self.has_more = more if position.forward else self._any_past(queryset, forward=True)
        self.has_before = more if not position.forward else self._any_past(queryset,
                                                                           forward=False)
        self.bounded_count(queryset, seen=len(page) + self.has_more)
        return page

    def _any_past(self, queryset, *, forward: bool) -> bool:
        """A row past the page's end (`forward`) or before its start; an empty page (its
        rows gone since the cursor was made) has neither."""
        row = self.last if forward else self.first
        if row is None:
            return False
        field, descending = self.keyset_order
        past = keyset.at_row(row, field, descending=descending, forward=forward)
        # Kept in the list's order (`exists()` would drop it): the planner then walks the
        # index from the position instead of a heap scan that may find the row last.
        rows = queryset.prefetch_related(None).filter(keyset.beyond(field, past))
        return bool(rows.values_list("pk", flat=True)[:1])

    def _link(self, row, *, forward: bool) -> str:
        field, descending = self.keyset_order
        cursor = keyset.at_row(row, field, descending=descending, forward=forward).encode()
        url = remove_query_param(self.request.build_absolute_uri(), self.offset_query_param)
        return replace_query_param(url, self.cursor_query_param, cursor)

    def get_next_link(self):
        if not self.has_more:
            return None
        if self.last is None:
            return super().get_next_link()
        return self._link(self.last, forward=True)

    def get_previous_link(self):
        if not self.has_before:
            return None
        if self.first is None:  # an offset past the end: the offset page before it
            return super().get_previous_link() if self.position is None else None
        return self._link(self.first, forward=False)

    def get_schema_operation_parameters(self, view):
        return [*super().get_schema_operation_parameters(view), {
            "name": self.cursor_query_param, "required": False, "in": "query",
            "description": "A position from `next` or `previous` (opaque; not with `offset`).",
            "schema": {"type": "string", "maxLength": keyset.MAX_CURSOR_CHARS}}]


def keyset_order(queryset) -> tuple[str, bool] | None:
    """(time field, descending) for a queryset ordered by (that field, id) the same way."""
    fields = tuple(queryset.query.order_by) or tuple(queryset.model._meta.ordering)
    if len(fields) != 2 or not all(isinstance(f, str) for f in fields):
        return None
    time, row_id = fields
    if row_id.lstrip("-") not in ("id", "pk") or time.startswith("-") != row_id.startswith("-"):
        return None
    return time.lstrip("-"), time.startswith("-")


def planner_rows(queryset) -> int:
    """PostgreSQL's estimate of the rows the query gives (EXPLAIN, nothing is read)."""
    sql, params = queryset.order_by().query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
