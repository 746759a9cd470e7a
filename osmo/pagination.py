"""Pagination with bounds: a page holds at most `max_limit` rows, and an offset beyond any
table is an empty page (not a database overflow)."""

from __future__ import annotations

import json

from django.db import connections
from rest_framework.pagination import LimitOffsetPagination

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
        self.count = queryset.order_by()[:COUNT_BOUND + 1].count()
        self.count_is_estimate = self.count > COUNT_BOUND
        if self.count_is_estimate:
            seen = self.offset + len(page) + self.has_more
            self.count = max(planner_rows(queryset), seen, COUNT_BOUND + 1)
        return page

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


def planner_rows(queryset) -> int:
    """PostgreSQL's estimate of the rows the query gives (EXPLAIN, nothing is read)."""
    sql, params = queryset.order_by().query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
