"""Input limits, checked before any work that grows with the input is done.

A spec, a workload or a JSON body is untrusted text. Before it is built into Python objects, one
pass over libyaml's event stream (iterative: no recursion, whatever the nesting) measures its
nesting depth and its size with every alias expanded, so a deeply nested document or an alias
bomb ("billion laughs") is refused in time linear in its text; a JSON body is walked without
recursion the same way. The same pass counts the items of the sequences a caller names (a
workflow's groups and tasks), so 10,000 groups are refused at the 101st, before any is built.
`InputLimits` also holds the counts the workflow spec and the pod grouper check after parsing
(replicas, pods, subgroups, template work). Each limit has its own contract code; the defaults
are raised in settings (`OSMO_MAX_*`, see the README, and `osmo.limits`). Pure: no Django
import, so the pure spec package can use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

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


class LimitExceeded(ValueError):
    """Input over one of the limits: its own contract code, the field path and the limit."""

    def __init__(self, code: str, path: str, message: str):
        self.code, self.path, self.message = code, path, message
        self.errors = {path: [message]}
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class ItemLimit:
    """At most `limit` items in all in the sequences at `paths` (mapping keys from the top;
    "*" stands for any item of a sequence), else `code` with "more than {limit} {noun}"."""

    paths: frozenset[tuple[str, ...]]
    limit: int
    code: str
    where: str
    noun: str


def check_yaml(text: str, limits: InputLimits = DEFAULT_LIMITS, *, path: str = "file",
               items: Sequence[ItemLimit] = ()) -> None:
    """Refuse YAML nested deeper than ``max_depth``, larger than ``max_nodes`` values with
    its aliases expanded, or with more `items` than their limits. Text libyaml cannot parse is
    left to the loader to report."""
    try:
        _measure(yaml.parse(text, Loader=SAFE_LOADER), limits, path, items)
    except yaml.YAMLError as error:
        # Newer libyaml (PyYAML 6.0.4's wheels) has its own nesting limit, met while it scans
        # ahead of the events we count: the same refusal, in our words.
        if "maximum nesting depth" in str(error):
            raise LimitExceeded("too_deep", path,
                                f"nested deeper than {limits.max_depth} levels") from error
        return


def _measure(events: Iterator[yaml.Event], limits: InputLimits, path: str,
             items: Sequence[ItemLimit] = ()) -> None:
    depth = nodes = 0
    sizes: dict[str, int] = {}  # anchor → values it stands for, expanded
    open_collections: list[tuple[str | None, int]] = []
    counted = {key: item for item in items for key in item.paths}
    counts = dict.fromkeys(items, 0)
    # Where each open collection is: [its key path, in a mapping: the pending key or None].
    places: list[list] = []
    for event in events:
        if items and isinstance(event, yaml.NodeEvent):
            _count_item(event, places, counted, counts)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            nodes += 1
            if depth > limits.max_depth:
                raise LimitExceeded("too_deep", path,
                                    f"nested deeper than {limits.max_depth} levels")
            open_collections.append((event.anchor, nodes))
        elif isinstance(event, yaml.CollectionEndEvent):
            if items:
                places.pop()
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


def _count_item(event: yaml.NodeEvent, places: list[list], counted: dict, counts: dict) -> None:
    """Follow where `event` (a node starting) is, and count it if it is an item of a counted
    sequence."""
    where: tuple[str, ...] | None = ()
    if places:
        parent = places[-1]
        if parent[1] is False:  # a mapping expecting a key: this node is one
            key = event.value if isinstance(event, yaml.ScalarEvent) else None
            parent[1] = key
            where = None
        elif parent[1] is None or isinstance(parent[1], str):  # a mapping's value
            where = None if parent[0] is None or parent[1] is None else (*parent[0], parent[1])
            parent[1] = False
        else:  # an item of a sequence
            where = None if parent[0] is None else (*parent[0], "*")
            item = counted.get(parent[0])
            if item is not None:
                counts[item] += 1
                if counts[item] > item.limit:
                    raise LimitExceeded(item.code, item.where,
                                        f"more than {item.limit} {item.noun}")
    if isinstance(event, yaml.MappingStartEvent):
        places.append([where, False])
    elif isinstance(event, yaml.SequenceStartEvent):
        places.append([where, True])


def load_yaml(text: str, limits: InputLimits = DEFAULT_LIMITS, *, path: str = "file",
              items: Sequence[ItemLimit] = ()) -> Any:
    check_yaml(text, limits, path=path, items=items)
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
