"""Pagination with bounds: a page holds at most `max_limit` rows, and an offset beyond any
table is an empty page (not a database overflow)."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 1000

    def get_offset(self, request):
        return min(super().get_offset(request), MAX_OFFSET)
