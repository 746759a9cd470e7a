"""Which grouper serves a workload kind: the registry with the built-in plugins loaded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import plugins  # noqa: F401 - importing the plugins registers the built-in kinds
from .owners import group_kind
from .registry import DEFAULT_GROUPER, GROUPERS, Grouper


def grouper_for(obj: Mapping[str, Any]) -> Grouper:
    return GROUPERS.get(group_kind(obj), DEFAULT_GROUPER)


def registered_kinds() -> dict[tuple[str, str], str]:
    return {key: grouper.name for key, grouper in sorted(GROUPERS.items())}
