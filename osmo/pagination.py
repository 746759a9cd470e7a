"""Pagination with bounds: a page holds at most `max_limit` rows, and an offset beyond any
table is an empty page (not a database overflow)."""

from __future__ import annotations

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
