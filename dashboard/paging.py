"""The dashboard's pages over the whole history: a page reads its rows and one past them, and
the count is exact up to COUNT_BOUND (a bounded count), above it shown as "more than"."""

from __future__ import annotations

from dataclasses import dataclass

from osmo.pagination import COUNT_BOUND, MAX_OFFSET


@dataclass(frozen=True)
class BoundedPage:
    object_list: list
    number: int
    has_next: bool
    count: int  # exact when not `count_is_bound`
    count_is_bound: bool
    per_page: int

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1

    @property
    def num_pages(self) -> int | None:
        """None when the count is only a bound."""
        if self.count_is_bound:
            return None
        return max(1, -(-self.count // self.per_page))


def bounded_page(queryset, number: int, per_page: int) -> BoundedPage:
    number = max(1, min(number, MAX_OFFSET // per_page))
    offset = (number - 1) * per_page
    rows = list(queryset[offset:offset + per_page + 1])
    count = queryset.order_by()[:COUNT_BOUND + 1].count()
    return BoundedPage(rows[:per_page], number, len(rows) > per_page, min(count, COUNT_BOUND),
                       count > COUNT_BOUND, per_page)
