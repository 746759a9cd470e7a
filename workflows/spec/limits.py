"""Input limits, checked before any work that grows with the input is done.

A spec or a workload is untrusted text. Before it is built into Python objects, one pass over
libyaml's event stream (iterative: no recursion, whatever the nesting) measures its nesting
depth and its size with every alias expanded, so a deeply nested document or an alias bomb
("billion laughs") is refused in time linear in its text. After parsing, the number of groups,
tasks and replicas is checked before anything is built from them. Each limit has its own
contract code; the defaults are raised in settings (`OSMO_MAX_*`, see the README).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from .errors import SpecError

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class InputLimits:
    max_depth: int = 64  # nesting of mappings and sequences
    max_nodes: int = 200_000  # YAML/JSON values, aliases counted as expanded
    max_groups: int = 100  # per workflow
    max_tasks: int = 1_000  # per workflow, replicas counted
    max_replicas: int = 1_000  # per task
    max_pods: int = 1_000  # per workload (replicas, parallelism, ... expanded)
    max_subgroups: int = 256  # per PodGroup
    max_template_iterations: int = 10_000  # loop iterations (and range() length) of a template
    max_template_value: int = 1024 * 1024  # characters or items of one value a template makes
    max_template_cpu_ms: int = 2_000  # CPU time of one rendering
    max_rendered_bytes: int = 4 * 1024 * 1024  # a rendered template


DEFAULT_LIMITS = InputLimits()


class LimitExceeded(SpecError):
    """Input over one of the limits: its own contract code, the field path and the limit."""

    def __init__(self, code: str, path: str, message: str):
        self.code = code
        super().__init__({path: [message]})


def check_yaml(text: str, limits: InputLimits = DEFAULT_LIMITS, *, path: str = "file") -> None:
    """Refuse YAML nested deeper than ``max_depth`` or larger than ``max_nodes`` values with
    its aliases expanded. Text libyaml cannot parse is left to the loader to report."""
    try:
        _measure(yaml.parse(text, Loader=SAFE_LOADER), limits, path)
    except yaml.YAMLError as error:
        # Newer libyaml (PyYAML 6.0.4's wheels) has its own nesting limit, met while it scans
        # ahead of the events we count: the same refusal, in our words.
        if "maximum nesting depth" in str(error):
            raise LimitExceeded("too_deep", path,
                                f"nested deeper than {limits.max_depth} levels") from error
        return


def _measure(events: Iterator[yaml.Event], limits: InputLimits, path: str) -> None:
    depth = nodes = 0
    sizes: dict[str, int] = {}  # anchor → values it stands for, expanded
    open_collections: list[tuple[str | None, int]] = []
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            nodes += 1
            if depth > limits.max_depth:
                raise LimitExceeded("too_deep", path,
                                    f"nested deeper than {limits.max_depth} levels")
            open_collections.append((event.anchor, nodes))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, first = open_collections.pop()
            if anchor:
                sizes[anchor] = nodes - first + 1
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            nodes += sizes.get(event.anchor, 1)
        if nodes > limits.max_nodes:
            raise LimitExceeded("too_large", path,
                                f"more than {limits.max_nodes} values with aliases expanded")


def load_yaml(text: str, limits: InputLimits = DEFAULT_LIMITS, *, path: str = "file") -> Any:
    check_yaml(text, limits, path=path)
    return yaml.load(text, Loader=SAFE_LOADER)


def load_yaml_all(text: str, limits: InputLimits = DEFAULT_LIMITS, *,
                  path: str = "file") -> list[Any]:
    check_yaml(text, limits, path=path)
    return [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]


def check_json_depth(value: Any, limits: InputLimits = DEFAULT_LIMITS, *,
                     path: str = "body") -> None:
    """Refuse parsed JSON nested deeper than ``max_depth`` (walked without recursion)."""
    stack = [(value, 1)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise LimitExceeded("too_large", path, f"more than {limits.max_nodes} values")
        if isinstance(item, dict | list):
            if depth > limits.max_depth:
                raise LimitExceeded("too_deep", path,
                                    f"nested deeper than {limits.max_depth} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def load_json(text: str | bytes, limits: InputLimits = DEFAULT_LIMITS, *,
              path: str = "body") -> Any:
    """json.loads, with deep nesting refused (Python's own parser would recurse)."""
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise LimitExceeded("too_deep", path,
                            f"nested deeper than {limits.max_depth} levels") from exc
    check_json_depth(value, limits, path=path)
    return value
