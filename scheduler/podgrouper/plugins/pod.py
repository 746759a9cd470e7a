"""A bare Pod (no owner): its own PodGroup, minMember 1, class ``train``."""

from __future__ import annotations

import copy

from ..registry import Grouper, register


@register("", "Pod")
class PodGrouper(Grouper):
    name = "pod"

    def expand(self, owner):
        return [copy.deepcopy(dict(owner))]
