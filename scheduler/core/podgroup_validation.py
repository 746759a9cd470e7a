"""The PodGroup webhook rules (SCHEDULING.md "PodGroup validation"), pure and stdlib only.

A PodGroup manifest (a plain dict, as the API server or our builder hands it over) plus,
optionally, its pods go in; errors and warnings come out as ``{path, message}`` items whose
paths name the offending field (``spec.subGroups[2].minSubGroup``) and whose messages name the
numbers. The API is KAI v0.17's (singular ``topologyConstraint``); seed 001's plural
``topologyConstraints`` is folded into it first by :func:`normalize_topology_constraints`.

Decisions where the documents are silent (each is tested):

- Mutual exclusivity (seed 000) is reported on the ``minMember`` path, because ``minSubGroup``
  is the explicit field a user keeps; when both are set and ``minMember`` is larger than what
  ``minSubGroup`` children guarantee, seed 003's consistency warning is added as well.
- ``minMember: 0`` counts as unset (seed 000: "must be 0 or unset").
- A leaf's ``minMember`` of 0 or missing is an error (a leaf must gang on something).
- The "guaranteed" pod count of ``minSubGroup = k`` is the sum of the k *largest* children's
  required pods: the consistency warning fires only when ``minMember`` surely cannot be met by
  the k required children at their minimum (the seed's 3 × 8 = 24 < 30 example).
- Without subgroups, pods belong to KAI's implicit leaf ``default``; a pod label naming
  anything else is an error. With subgroups every pod must name a leaf.
- A preferred level coarser than the required level has no effect: warning. A constraint
  without any level: warning. Unknown keys inside a constraint: error (KAI would drop them).
- Several errors are reported at once (all rules run), in spec order, so a client sees
  everything it must fix in one round trip.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .kai_names import (  # noqa: F401 - re-exported names of this module's public API
    DEFAULT_TOPOLOGY_LEVELS,
    DEFAULT_TOPOLOGY_NAME,
    IMPLICIT_SUBGROUP,
    PODGROUP_ANNOTATION,
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    QUEUE_LABEL,
    SUBGROUP_LABEL,
)

CONSTRAINT_KEYS = ("preferredTopologyLevel", "requiredTopologyLevel", "topology")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Issue:
    """One finding: the field path and a human sentence naming the numbers."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@dataclass(frozen=True)
class ValidationResult:
    errors: tuple[Issue, ...]
    warnings: tuple[Issue, ...]

    @property
    def allowed(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        """The `POST /api/kai/podgroups/validate` response body."""
        return {
            "allowed": self.allowed,
            "errors": [issue.as_dict() for issue in self.errors],
            "warnings": [issue.as_dict() for issue in self.warnings],
        }


def is_dns_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.match(value))


def is_dns_subdomain(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 253 and bool(_DNS_SUBDOMAIN.match(value))


# --------------------------------------------------------------------------------------------
# Topologies


class Topology:
    """A Topology's usable level names (aliases and node labels), coarsest first."""

    def __init__(self, levels: Iterable[object]):
        self._rank: dict[str, int] = {}
        self.levels: list[tuple[str | None, str]] = []
        for rank, level in enumerate(levels):
            alias, label = _level_pair(level)
            self.levels.append((alias, label))
            self._rank[label] = rank
            if alias:
                self._rank[alias] = rank

    def has(self, level: str) -> bool:
        return level in self._rank

    def rank(self, level: str) -> int:
        """0 = coarsest."""
        return self._rank[level]

    def names(self) -> list[str]:
        return [alias or label for alias, label in self.levels]


def _level_pair(level: object) -> tuple[str | None, str]:
    if isinstance(level, str):
        return None, level
    if isinstance(level, Mapping):
        return level.get("alias") or None, str(level["nodeLabel"])
    alias, label = level  # type: ignore[misc]
    return alias, label


def default_topologies() -> dict[str, Topology]:
    return {DEFAULT_TOPOLOGY_NAME: Topology(DEFAULT_TOPOLOGY_LEVELS)}


def _as_topologies(topologies: Mapping[str, object] | None) -> dict[str, Topology]:
    if topologies is None:
        return default_topologies()
    return {
        name: levels if isinstance(levels, Topology) else Topology(levels)  # type: ignore[arg-type]
        for name, levels in topologies.items()
    }


# --------------------------------------------------------------------------------------------
# Seed 001 plural form → KAI v0.17 singular form


_PLURAL_PATH = "spec.topologyConstraints"


def normalize_topology_constraints(spec: Mapping[str, Any]) -> tuple[dict[str, Any], list[Issue]]:
    """Fold seed 001's ``topologyConstraints`` into singular ``topologyConstraint`` fields.

    ``global`` → the spec; a ``subGroups`` map entry → that subgroup; a ``subGroupSets`` entry →
    the subgroup whose direct children are exactly the set (the spec itself when the set is
    exactly the top-level subgroups). Returns a deep copy without the plural key, and the
    errors found (paths under ``spec.topologyConstraints``). A spec without the plural key is
    returned as an unchanged copy.
    """
    result = copy.deepcopy(dict(spec))
    plural = result.pop("topologyConstraints", None)
    if plural is None:
        return result, []
    if not isinstance(plural, Mapping):
        return result, [Issue(_PLURAL_PATH, "must be an object with global, subGroups, "
                                           "subGroupSets")]
    folder = _ConstraintFolder(result)
    for key in plural:
        if key not in ("global", "subGroups", "subGroupSets"):
            folder.issues.append(Issue(f"{_PLURAL_PATH}.{key}", f"unknown field '{key}'"))
    if "global" in plural:
        folder.assign(result, plural["global"], f"{_PLURAL_PATH}.global", "the PodGroup")
    folder.fold_subgroups(plural.get("subGroups"))
    folder.fold_sets(plural.get("subGroupSets"))
    return result, folder.issues


class _ConstraintFolder:
    """Writes the plural form's constraints onto a spec copy, collecting what does not fit."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.issues: list[Issue] = []
        subgroups = spec.get("subGroups")
        self.entries = [sg for sg in subgroups if isinstance(sg, dict)] \
            if isinstance(subgroups, list) else []
        self.by_name: dict[str, dict[str, Any]] = {}
        for entry in self.entries:
            self.by_name.setdefault(entry.get("name"), entry)  # type: ignore[arg-type]

    def assign(self, target: dict[str, Any], constraint: object, path: str, what: str) -> None:
        existing = target.get("topologyConstraint")
        if existing is not None and existing != constraint:
            self.issues.append(Issue(path, f"conflicts with the topologyConstraint already set "
                                           f"on {what}"))
            return
        target["topologyConstraint"] = copy.deepcopy(constraint)

    def fold_subgroups(self, per_subgroup: object) -> None:
        """``subGroups``: subgroup name → its constraint."""
        if per_subgroup is None:
            return
        if not isinstance(per_subgroup, Mapping):
            self.issues.append(Issue(f"{_PLURAL_PATH}.subGroups",
                                     "must map subgroup names to constraints"))
            return
        for name, constraint in per_subgroup.items():
            path = f"{_PLURAL_PATH}.subGroups.{name}"
            if name not in self.by_name:
                self.issues.append(Issue(path, f"subgroup '{name}' does not exist"))
                continue
            self.assign(self.by_name[name], constraint, path, f"subgroup '{name}'")

    def fold_sets(self, sets: object) -> None:
        """``subGroupSets``: each set's constraint goes to the subgroup that has exactly the
        set as its children."""
        if sets is None:
            return
        if not isinstance(sets, list):
            self.issues.append(Issue(f"{_PLURAL_PATH}.subGroupSets", "must be a list"))
            return
        children: dict[str | None, set[str]] = {}
        for entry in self.entries:
            children.setdefault(entry.get("parent"), set()).add(entry.get("name"))  # type: ignore[arg-type]
        seen_in_set: dict[str, int] = {}
        for index, item in enumerate(sets):
            self._fold_set(index, item, children, seen_in_set)

    def _fold_set(self, index: int, item: object, children: dict[str | None, set[str]],
                  seen_in_set: dict[str, int]) -> None:
        path = f"{_PLURAL_PATH}.subGroupSets[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("subGroups"), list):
            self.issues.append(Issue(path,
                                     "must be an object with subGroups (a list) and constraint"))
            return
        members = [str(name) for name in item["subGroups"]]
        for name in members:
            if name in seen_in_set:
                self.issues.append(Issue(
                    f"{path}.subGroups",
                    f"subgroup '{name}' is already in subGroupSets[{seen_in_set[name]}]; "
                    "a subgroup belongs to at most one set",
                ))
            seen_in_set.setdefault(name, index)
        missing = [name for name in members if name not in self.by_name]
        if missing:
            self.issues.append(Issue(f"{path}.subGroups",
                                     f"unknown subgroups: {', '.join(missing)}"))
            return
        wanted = set(members)
        owners = [parent for parent, kids in children.items() if kids == wanted]
        if not owners:
            self.issues.append(Issue(
                f"{path}.subGroups",
                f"no subgroup has exactly the children {sorted(wanted)}; add a parent subgroup "
                "for them (parent: on each) and put the constraint on it",
            ))
            return
        owner = owners[0]
        if owner is None:
            self.assign(self.spec, item.get("constraint"), f"{path}.constraint", "the PodGroup")
        else:
            self.assign(self.by_name[owner], item.get("constraint"), f"{path}.constraint",
                        f"subgroup '{owner}'")


# --------------------------------------------------------------------------------------------
# Validation


def _int_field(
    container: Mapping[str, Any], key: str, path: str, errors: list[Issue]
) -> int | None:
    """Read an optional non-negative integer; report the wrong type once."""
    if key not in container or container[key] is None:
        return None
    value = container[key]
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(Issue(f"{path}.{key}", f"{key} must be an integer, got {value!r}"))
        return None
    return value


class _Node:
    def __init__(self, index: int | None, name: str | None, raw: Mapping[str, Any]):
        self.index = index
        self.name = name
        self.raw = raw
        self.children: list[_Node] = []
        self.min_member: int | None = None
        self.min_sub_group: int | None = None
        self.pods = 0

    @property
    def path(self) -> str:
        return "spec" if self.index is None else f"spec.subGroups[{self.index}]"

    @property
    def label(self) -> str:
        return "the PodGroup" if self.index is None else f"subgroup '{self.name}'"


def subgroup_count(manifest: object) -> int:
    """How many subGroups a PodGroup manifest lists (0 when it has none or is malformed): what
    the callers compare with their limit before any validation work."""
    spec = manifest.get("spec") if isinstance(manifest, Mapping) else None
    subgroups = spec.get("subGroups") if isinstance(spec, Mapping) else None
    return len(subgroups) if isinstance(subgroups, list) else 0


def validate_podgroup(
    manifest: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] | None = None,
    *,
    topologies: Mapping[str, object] | None = None,
    default_topology: str = DEFAULT_TOPOLOGY_NAME,
) -> ValidationResult:
    """Apply the webhook rules to a PodGroup manifest (and, optionally, its pods).

    ``topologies`` maps Topology names to their levels, coarsest first (each level a node-label
    string, an ``(alias, nodeLabel)`` pair or a ``{alias, nodeLabel}`` dict); default: the
    contract's ``osmo-topology``. A constraint without ``topology`` uses ``default_topology``.
    """
    errors: list[Issue] = []
    warnings: list[Issue] = []
    if not isinstance(manifest, Mapping):
        return ValidationResult((Issue("", "a PodGroup manifest must be an object"),), ())
    name = _check_header(manifest, errors)
    raw_spec = manifest.get("spec")
    if not isinstance(raw_spec, Mapping):
        errors.append(Issue("spec", "a PodGroup needs a spec object"))
        return ValidationResult(tuple(errors), tuple(warnings))

    spec, plural_issues = normalize_topology_constraints(raw_spec)
    errors.extend(plural_issues)
    known_topologies = _as_topologies(topologies)

    root = _Node(None, None, spec)
    root.min_member = _int_field(spec, "minMember", "spec", errors)
    root.min_sub_group = _int_field(spec, "minSubGroup", "spec", errors)
    nodes = _collect_subgroups(spec, errors)
    tree_ok = _link_tree(root, nodes, errors)

    _check_counts(root, errors)
    for node in nodes:
        _check_counts(node, errors)

    _check_constraint(root, known_topologies, default_topology, errors, warnings)
    for node in nodes:
        _check_constraint(node, known_topologies, default_topology, errors, warnings)

    if pods is not None:
        _check_pods(name, spec, root, nodes, pods, errors, warnings)
    if tree_ok:
        _check_reachability(root, pods is not None, warnings)
    return ValidationResult(tuple(errors), tuple(warnings))


def _check_header(manifest: Mapping[str, Any], errors: list[Issue]) -> object:
    """apiVersion, kind and metadata.name; returns the name (None when generated or missing)."""
    if manifest.get("apiVersion") != PODGROUP_API_VERSION:
        errors.append(Issue("apiVersion", f"must be {PODGROUP_API_VERSION}, "
                                          f"got {manifest.get('apiVersion')!r}"))
    if manifest.get("kind") != PODGROUP_KIND:
        errors.append(Issue("kind", f"must be {PODGROUP_KIND}, got {manifest.get('kind')!r}"))
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if name is None:
        if not (isinstance(metadata, Mapping) and metadata.get("generateName")):
            errors.append(Issue("metadata.name", "a PodGroup needs a name"))
    elif not is_dns_subdomain(name):
        errors.append(Issue("metadata.name", f"'{name}' is not a valid DNS-1123 subdomain "
                                             "(lowercase alphanumerics, '-', '.'; ≤ 253)"))
    return name


def _collect_subgroups(spec: Mapping[str, Any], errors: list[Issue]) -> list[_Node]:
    raw = spec.get("subGroups")
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(Issue("spec.subGroups", "must be a list of subgroups"))
        return []
    nodes: list[_Node] = []
    first_index: dict[str, int] = {}
    for index, entry in enumerate(raw):
        path = f"spec.subGroups[{index}]"
        if not isinstance(entry, Mapping):
            errors.append(Issue(path, "a subgroup must be an object"))
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            errors.append(Issue(f"{path}.name", "a subgroup needs a name"))
            continue
        if not is_dns_label(name):
            errors.append(Issue(f"{path}.name", f"'{name}' is not a DNS label (lowercase "
                                                "alphanumerics and '-', ≤ 63 characters)"))
        if name in first_index:
            errors.append(Issue(f"{path}.name", f"duplicate subgroup name '{name}' "
                                                f"(first at spec.subGroups[{first_index[name]}])"))
            continue
        first_index[name] = index
        node = _Node(index, name, entry)
        node.min_member = _int_field(entry, "minMember", path, errors)
        node.min_sub_group = _int_field(entry, "minSubGroup", path, errors)
        nodes.append(node)
    return nodes


def _link_tree(root: _Node, nodes: list[_Node], errors: list[Issue]) -> bool:
    """Attach children to parents; report missing parents and cycles. True when a tree."""
    by_name = {node.name: node for node in nodes}
    ok = True
    parent_of: dict[str, str] = {}
    for node in nodes:
        parent = node.raw.get("parent")
        if parent is None or parent == "":
            root.children.append(node)
            continue
        if not isinstance(parent, str) or parent not in by_name:
            errors.append(Issue(f"{node.path}.parent",
                                f"parent '{parent}' of subgroup '{node.name}' does not exist"))
            ok = False
            continue
        parent_of[node.name] = parent  # type: ignore[index]
        by_name[parent].children.append(node)
    # Walk up from every node once: nodes seen by an earlier walk are settled, so the whole
    # check is linear in the number of subgroups (a long parent chain included).
    settled: set[str] = set()
    for node in nodes:
        chain: list[str] = []
        position: dict[str, int] = {}
        current = node.name
        while current is not None and current not in settled and current not in position:
            position[current] = len(chain)  # type: ignore[index]
            chain.append(current)  # type: ignore[arg-type]
            current = parent_of.get(current)  # type: ignore[arg-type]
        settled.update(chain)
        if current is None or current not in position:
            continue
        cycle = chain[position[current]:]
        ok = False
        errors.append(Issue(f"{node.path}.parent", "parent cycle: "
                            + " -> ".join([*cycle, current])))
    return ok


def _check_counts(node: _Node, errors: list[Issue]) -> None:
    is_root = node.index is None
    count = len(node.children)
    member, sub_group = node.min_member, node.min_sub_group
    if member is not None and member < 0:
        errors.append(Issue(f"{node.path}.minMember", f"minMember must be ≥ 0, got {member}"))
    both = member is not None and member > 0 and sub_group is not None
    if both:
        errors.append(Issue(
            f"{node.path}.minMember",
            f"minMember ({member}) and minSubGroup ({sub_group}) are mutually exclusive on "
            f"{node.label}; keep minSubGroup and drop minMember",
        ))
    if sub_group is not None:
        if count == 0:
            where = "a PodGroup without subGroups" if is_root else f"leaf {node.label}"
            errors.append(Issue(f"{node.path}.minSubGroup",
                                f"minSubGroup ({sub_group}) is set on {where}; it counts direct "
                                "child subgroups and there are none"))
        elif sub_group <= 0:
            errors.append(Issue(f"{node.path}.minSubGroup",
                                f"minSubGroup must be > 0, got {sub_group}"))
        elif sub_group > count:
            errors.append(Issue(f"{node.path}.minSubGroup",
                                f"minSubGroup ({sub_group}) exceeds the number of direct child "
                                f"subgroups ({count}) of {node.label}"))
    if is_root:
        return
    if count == 0:
        if member is None or member <= 0:
            errors.append(Issue(f"{node.path}.minMember",
                                f"leaf {node.label} needs minMember > 0 "
                                f"(got {'nothing' if member is None else member})"))
    elif member is not None and member > 0 and not both:
        errors.append(Issue(f"{node.path}.minMember",
                            f"minMember ({member}) is set on mid-level {node.label}, which has "
                            f"{count} child subgroups; use minSubGroup (1..{count}) instead"))


def _check_constraint(
    node: _Node,
    topologies: dict[str, Topology],
    default_topology: str,
    errors: list[Issue],
    warnings: list[Issue],
) -> None:
    constraint = node.raw.get("topologyConstraint")
    if constraint is None:
        return
    path = f"{node.path}.topologyConstraint"
    if not isinstance(constraint, Mapping):
        errors.append(Issue(path, "must be an object"))
        return
    for key in constraint:
        if key not in CONSTRAINT_KEYS:
            errors.append(Issue(f"{path}.{key}", f"unknown field '{key}' (known: "
                                                 f"{', '.join(CONSTRAINT_KEYS)})"))
    topology_name = constraint.get("topology") or default_topology
    topology = topologies.get(topology_name)
    if topology is None:
        errors.append(Issue(f"{path}.topology", f"unknown Topology '{topology_name}' (known: "
                                                f"{', '.join(sorted(topologies))})"))
        return
    levels: dict[str, str] = {}
    for key in ("requiredTopologyLevel", "preferredTopologyLevel"):
        level = constraint.get(key)
        if level in (None, ""):
            continue
        if not isinstance(level, str) or not topology.has(level):
            errors.append(Issue(f"{path}.{key}",
                                f"level '{level}' is not in Topology '{topology_name}' "
                                f"(levels: {', '.join(topology.names())})"))
            continue
        levels[key] = level
    if not constraint.get("requiredTopologyLevel") and not constraint.get("preferredTopologyLevel"):
        warnings.append(Issue(path, "names no requiredTopologyLevel or preferredTopologyLevel; "
                                    "it has no effect"))
    required = levels.get("requiredTopologyLevel")
    preferred = levels.get("preferredTopologyLevel")
    if required and preferred and topology.rank(preferred) < topology.rank(required):
        warnings.append(Issue(f"{path}.preferredTopologyLevel",
                              f"preferred level '{preferred}' is coarser than required level "
                              f"'{required}'; it has no effect"))


def _label_path(index: int, key: str) -> str:
    return f"pods[{index}].metadata.labels['{key}']"


def _check_pods(
    podgroup_name: object,
    spec: Mapping[str, Any],
    root: _Node,
    nodes: list[_Node],
    pods: Sequence[Mapping[str, Any]],
    errors: list[Issue],
    warnings: list[Issue],
) -> None:
    by_name = {node.name: node for node in nodes}
    queue = spec.get("queue")
    for index, pod in enumerate(pods):
        metadata = pod.get("metadata") or {} if isinstance(pod, Mapping) else {}
        pod_name = metadata.get("name", f"#{index}")
        labels = metadata.get("labels") or {}
        annotations = metadata.get("annotations") or {}
        owner = annotations.get(PODGROUP_ANNOTATION)
        if podgroup_name is not None and owner != podgroup_name:
            errors.append(Issue(f"pods[{index}].metadata.annotations['{PODGROUP_ANNOTATION}']",
                                f"pod '{pod_name}' names PodGroup {owner!r}, "
                                f"not '{podgroup_name}'"))
        pod_queue = labels.get(QUEUE_LABEL)
        if queue and pod_queue is not None and pod_queue != queue:
            warnings.append(Issue(_label_path(index, QUEUE_LABEL),
                                  f"pod '{pod_name}' is labelled queue '{pod_queue}' but the "
                                  f"PodGroup's queue is '{queue}'; the PodGroup's wins"))
        subgroup = labels.get(SUBGROUP_LABEL)
        if not nodes:
            root.pods += 1  # the implicit leaf; with subgroups pods are counted per leaf
            if subgroup not in (None, IMPLICIT_SUBGROUP):
                errors.append(Issue(_label_path(index, SUBGROUP_LABEL),
                                    f"pod '{pod_name}' names subgroup '{subgroup}', which does "
                                    "not exist (the PodGroup has no subGroups)"))
            continue
        if subgroup is None:
            errors.append(Issue(_label_path(index, SUBGROUP_LABEL),
                                f"pod '{pod_name}' has no subgroup label; with subGroups every "
                                "pod must name a leaf subgroup"))
        elif subgroup not in by_name:
            errors.append(Issue(_label_path(index, SUBGROUP_LABEL),
                                f"pod '{pod_name}' names subgroup '{subgroup}', which does "
                                "not exist"))
        elif by_name[subgroup].children:
            errors.append(Issue(_label_path(index, SUBGROUP_LABEL),
                                f"pod '{pod_name}' names subgroup '{subgroup}', which is not a "
                                f"leaf (it has {len(by_name[subgroup].children)} child "
                                "subgroups)"))
        else:
            by_name[subgroup].pods += 1


def _pod_figures(root: _Node) -> tuple[dict[int, int], dict[int, int]]:
    """For every node of the tree (by id): the pods it needs at its minimum (leaf minMember,
    or its required children's sum) and the pods below it. One post-order pass, no recursion:
    a chain of thousands of subgroups costs as much as a flat list."""
    order: list[_Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    required: dict[int, int] = {}
    subtree: dict[int, int] = {}
    for node in reversed(order):  # children before parents
        subtree[id(node)] = node.pods + sum(subtree[id(child)] for child in node.children)
        if not node.children:
            required[id(node)] = max(node.min_member or 0, 0)
            continue
        needed = sorted((required[id(child)] for child in node.children), reverse=True)
        wanted = node.min_sub_group if node.min_sub_group is not None else len(needed)
        required[id(node)] = sum(needed[: max(wanted, 0)])
    return required, subtree


def _check_reachability(root: _Node, pods_known: bool, warnings: list[Issue]) -> None:
    """Warnings: minMember above the pods that exist, or above what minSubGroup guarantees."""
    required, subtree = _pod_figures(root)
    stack = [root]
    while stack:  # pre-order, children in their listed order
        node = stack.pop()
        stack.extend(reversed(node.children))
        member = node.min_member
        if member is None or member <= 0:
            continue
        if pods_known:
            total = subtree[id(node)]
            if member > total:
                warnings.append(Issue(f"{node.path}.minMember",
                                      f"minMember ({member}) cannot be reached: {node.label} has "
                                      f"only {total} pods"))
        if node.children and node.min_sub_group is not None and node.min_sub_group > 0:
            guaranteed = required[id(node)]
            if member > guaranteed:
                warnings.append(Issue(
                    f"{node.path}.minMember",
                    f"minMember ({member}) is inconsistent with minSubGroup "
                    f"({node.min_sub_group}): the required child subgroups need only "
                    f"{guaranteed} pods at their minimum",
                ))
