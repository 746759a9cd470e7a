"""The webhook rules of SCHEDULING.md "PodGroup validation", rule by rule."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.podgroup_validation import (
    ValidationResult,
    normalize_topology_constraints,
    validate_podgroup,
)

CORE = Path(__file__).resolve().parents[3] / "scheduler" / "core" / "podgroup_validation.py"


def pg(spec: dict, name: str = "pg") -> dict:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": spec}


def pod(subgroup: str | None, name: str = "p", owner: str = "pg", queue: str | None = None):
    labels = {} if subgroup is None else {"kai.scheduler/subgroup-name": subgroup}
    if queue:
        labels["kai.scheduler/queue"] = queue
    return {"metadata": {"name": name, "labels": labels,
                         "annotations": {"pod-group-name": owner}}}


def found(result: ValidationResult) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    return ([(i.path, i.message) for i in result.errors],
            [(i.path, i.message) for i in result.warnings])


def test_core_module_imports_only_stdlib() -> None:
    """The standard library, and the pure core's own modules (relative imports)."""
    tree = ast.parse(CORE.read_text())
    modules = {alias.name.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert modules <= {"__future__", "copy", "re", "collections", "dataclasses", "typing"}


def test_plain_gang_is_valid() -> None:
    assert validate_podgroup(pg({"minMember": 2, "queue": "q"})).as_dict() == {
        "allowed": True, "errors": [], "warnings": []}


def test_header_errors() -> None:
    result = validate_podgroup({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_"},
                                "spec": {}})
    assert found(result)[0] == [
        ("apiVersion", "must be scheduling.run.ai/v2alpha2, got 'v1'"),
        ("kind", "must be PodGroup, got 'Pod'"),
        ("metadata.name", "'Bad_' is not a valid DNS-1123 subdomain (lowercase alphanumerics, "
                          "'-', '.'; ≤ 253)"),
    ]
    assert found(validate_podgroup({**pg({}), "spec": None}))[0] == [
        ("spec", "a PodGroup needs a spec object")]
    assert found(validate_podgroup({**pg({}), "metadata": {}}))[0] == [
        ("metadata.name", "a PodGroup needs a name")]
    assert found(validate_podgroup([]))[0] == [("", "a PodGroup manifest must be an object")]


def test_structural_errors() -> None:
    spec = {"subGroups": [
        {"name": "a", "minMember": 1},
        {"name": "a", "minMember": 1},
        {"name": "Bad_Name", "minMember": 1},
        {"name": "orphan", "parent": "ghost", "minMember": 1},
        {"name": "x", "parent": "y", "minSubGroup": 1},
        {"name": "y", "parent": "x", "minSubGroup": 1},
        {"name": "self", "parent": "self", "minSubGroup": 1},
        "not-an-object",
        {"minMember": 1},
    ]}
    errors, _ = found(validate_podgroup(pg(spec)))
    assert errors == [
        ("spec.subGroups[1].name", "duplicate subgroup name 'a' (first at spec.subGroups[0])"),
        ("spec.subGroups[2].name", "'Bad_Name' is not a DNS label (lowercase alphanumerics and "
                                   "'-', ≤ 63 characters)"),
        ("spec.subGroups[7]", "a subgroup must be an object"),
        ("spec.subGroups[8].name", "a subgroup needs a name"),
        ("spec.subGroups[3].parent", "parent 'ghost' of subgroup 'orphan' does not exist"),
        ("spec.subGroups[4].parent", "parent cycle: x -> y -> x"),
        ("spec.subGroups[6].parent", "parent cycle: self -> self"),
    ]


def test_count_rules_name_the_numbers() -> None:
    spec = {
        "minMember": 0, "minSubGroup": 0,
        "subGroups": [
            {"name": "mid", "minMember": 5},
            {"name": "leaf", "parent": "mid", "minMember": 0},
            {"name": "mid2", "minSubGroup": 3},
            {"name": "l2", "parent": "mid2", "minMember": 1},
            {"name": "neg", "minMember": -1},
            {"name": "typed", "minMember": "4"},
        ],
    }
    errors, _ = found(validate_podgroup(pg(spec)))
    assert errors == [
        ("spec.subGroups[5].minMember", "minMember must be an integer, got '4'"),
        ("spec.minSubGroup", "minSubGroup must be > 0, got 0"),
        ("spec.subGroups[0].minMember", "minMember (5) is set on mid-level subgroup 'mid', which "
                                        "has 1 child subgroups; use minSubGroup (1..1) instead"),
        ("spec.subGroups[1].minMember", "leaf subgroup 'leaf' needs minMember > 0 (got 0)"),
        ("spec.subGroups[2].minSubGroup", "minSubGroup (3) exceeds the number of direct child "
                                          "subgroups (1) of subgroup 'mid2'"),
        ("spec.subGroups[4].minMember", "minMember must be ≥ 0, got -1"),
        ("spec.subGroups[4].minMember", "leaf subgroup 'neg' needs minMember > 0 (got -1)"),
        ("spec.subGroups[5].minMember", "leaf subgroup 'typed' needs minMember > 0 "
                                        "(got nothing)"),
    ]


def test_min_subgroup_without_subgroups() -> None:
    assert found(validate_podgroup(pg({"minSubGroup": 1})))[0] == [
        ("spec.minSubGroup", "minSubGroup (1) is set on a PodGroup without subGroups; it counts "
                             "direct child subgroups and there are none")]


def test_root_min_member_beside_subgroups_is_backward_compatible() -> None:
    spec = {"minMember": 9, "subGroups": [{"name": "a", "minMember": 4},
                                          {"name": "b", "minMember": 5}]}
    assert validate_podgroup(pg(spec)).allowed


def test_topology_rules() -> None:
    spec = {
        "topologyConstraint": {"requiredTopologyLevel": "rack", "preferredTopologyLevel": "zone"},
        "subGroups": [
            {"name": "a", "minMember": 1, "topologyConstraint": {"requiredTopologyLevel": "row"}},
            {"name": "b", "minMember": 1, "topologyConstraint": {"topology": "other"}},
            {"name": "c", "minMember": 1,
             "topologyConstraint": {"requiredTopologyLevel": "topology.osmo/block",
                                    "preferredTopologyLevel": "hostname", "weight": 1}},
            {"name": "d", "minMember": 1, "topologyConstraint": {}},
            {"name": "e", "minMember": 1, "topologyConstraint": "rack"},
        ],
    }
    errors, warnings = found(validate_podgroup(pg(spec)))
    assert errors == [
        ("spec.subGroups[0].topologyConstraint.requiredTopologyLevel",
         "level 'row' is not in Topology 'osmo-topology' (levels: zone, block, rack, hostname)"),
        ("spec.subGroups[1].topologyConstraint.topology",
         "unknown Topology 'other' (known: osmo-topology)"),
        ("spec.subGroups[2].topologyConstraint.weight",
         "unknown field 'weight' (known: preferredTopologyLevel, requiredTopologyLevel, "
         "topology)"),
        ("spec.subGroups[4].topologyConstraint", "must be an object"),
    ]
    assert warnings == [
        ("spec.topologyConstraint.preferredTopologyLevel",
         "preferred level 'zone' is coarser than required level 'rack'; it has no effect"),
        ("spec.subGroups[3].topologyConstraint",
         "names no requiredTopologyLevel or preferredTopologyLevel; it has no effect"),
    ]


def test_custom_topologies() -> None:
    topologies = {"dc": [("spine", "net/spine"), {"alias": "leaf", "nodeLabel": "net/leaf"}],
                  "flat": ["kubernetes.io/hostname"]}
    spec = {"topologyConstraint": {"topology": "dc", "requiredTopologyLevel": "spine"},
            "subGroups": [{"name": "a", "minMember": 1,
                           "topologyConstraint": {"requiredTopologyLevel": "net/leaf"}},
                          {"name": "b", "minMember": 1,
                           "topologyConstraint": {"requiredTopologyLevel": "rack"}}]}
    errors, _ = found(validate_podgroup(pg(spec), topologies=topologies, default_topology="dc"))
    assert errors == [("spec.subGroups[1].topologyConstraint.requiredTopologyLevel",
                       "level 'rack' is not in Topology 'dc' (levels: spine, leaf)")]


def test_pod_rules() -> None:
    spec = {"queue": "q", "subGroups": [{"name": "mid", "minSubGroup": 1},
                                        {"name": "leaf", "parent": "mid", "minMember": 3}]}
    pods = [pod("leaf", "ok", queue="q"), pod("mid", "on-mid"), pod("ghost", "lost"),
            pod(None, "bare"), pod("leaf", "stranger", owner="other"),
            pod("leaf", "elsewhere", queue="q2")]
    errors, warnings = found(validate_podgroup(pg(spec), pods))
    label = "metadata.labels['kai.scheduler/subgroup-name']"
    assert errors == [
        (f"pods[1].{label}", "pod 'on-mid' names subgroup 'mid', which is not a leaf (it has 1 "
                             "child subgroups)"),
        (f"pods[2].{label}", "pod 'lost' names subgroup 'ghost', which does not exist"),
        (f"pods[3].{label}", "pod 'bare' has no subgroup label; with subGroups every pod must "
                             "name a leaf subgroup"),
        ("pods[4].metadata.annotations['pod-group-name']",
         "pod 'stranger' names PodGroup 'other', not 'pg'"),
    ]
    assert warnings == [
        ("pods[5].metadata.labels['kai.scheduler/queue']",
         "pod 'elsewhere' is labelled queue 'q2' but the PodGroup's queue is 'q'; the "
         "PodGroup's wins"),
    ]


def test_pods_without_subgroups_use_the_implicit_default_leaf() -> None:
    pods = [pod("default", "a"), pod(None, "b"), pod("x", "c")]
    errors, warnings = found(validate_podgroup(pg({"minMember": 4}), pods))
    assert errors == [("pods[2].metadata.labels['kai.scheduler/subgroup-name']",
                       "pod 'c' names subgroup 'x', which does not exist (the PodGroup has no "
                       "subGroups)")]
    assert warnings == [("spec.minMember",
                         "minMember (4) cannot be reached: the PodGroup has only 3 pods")]


def test_leaf_min_member_unreachable_warning() -> None:
    spec = {"subGroups": [{"name": "a", "minMember": 3}]}
    _, warnings = found(validate_podgroup(pg(spec), [pod("a")]))
    assert warnings == [("spec.subGroups[0].minMember",
                         "minMember (3) cannot be reached: subgroup 'a' has only 1 pods")]


# ---- seed 001 normalizer ------------------------------------------------------------------

def test_normalizer_maps_global_subgroups_and_sets() -> None:
    spec = {
        "minMember": 1,
        "subGroups": [{"name": "r", "minSubGroup": 2}, {"name": "a", "parent": "r"},
                      {"name": "b", "parent": "r"}, {"name": "c"}],
        "topologyConstraints": {
            "global": {"requiredTopologyLevel": "zone"},
            "subGroups": {"a": {"requiredTopologyLevel": "rack"}},
            "subGroupSets": [{"subGroups": ["b", "a"], "constraint": {"requiredTopologyLevel":
                                                                      "block"}},
                             {"subGroups": ["r", "c"], "constraint": {"requiredTopologyLevel":
                                                                      "zone"}}],
        },
    }
    original = copy.deepcopy(spec)
    normalized, issues = normalize_topology_constraints(spec)
    assert spec == original  # input untouched
    assert issues == []
    assert normalized == {
        "minMember": 1,
        "subGroups": [
            {"name": "r", "minSubGroup": 2, "topologyConstraint": {"requiredTopologyLevel":
                                                                   "block"}},
            {"name": "a", "parent": "r", "topologyConstraint": {"requiredTopologyLevel": "rack"}},
            {"name": "b", "parent": "r"},
            {"name": "c"},
        ],
        "topologyConstraint": {"requiredTopologyLevel": "zone"},
    }


def test_normalizer_errors() -> None:
    spec = {
        "topologyConstraint": {"requiredTopologyLevel": "rack"},
        "subGroups": [{"name": "p", "minSubGroup": 1}, {"name": "a", "parent": "p",
                                                        "minMember": 1},
                      {"name": "b", "minMember": 1}],
        "topologyConstraints": {
            "global": {"requiredTopologyLevel": "zone"},
            "subGroups": {"ghost": {}},
            "subGroupSets": [{"subGroups": ["a", "b"], "constraint": {}},
                             {"subGroups": ["a"], "constraint": {}},
                             {"subGroups": ["zz"]}, "bad"],
            "extra": 1,
        },
    }
    _, issues = normalize_topology_constraints(spec)
    base = "spec.topologyConstraints"
    assert [(i.path, i.message) for i in issues] == [
        (f"{base}.extra", "unknown field 'extra'"),
        (f"{base}.global", "conflicts with the topologyConstraint already set on the PodGroup"),
        (f"{base}.subGroups.ghost", "subgroup 'ghost' does not exist"),
        (f"{base}.subGroupSets[0].subGroups",
         "no subgroup has exactly the children ['a', 'b']; add a parent subgroup for them "
         "(parent: on each) and put the constraint on it"),
        (f"{base}.subGroupSets[1].subGroups",
         "subgroup 'a' is already in subGroupSets[0]; a subgroup belongs to at most one set"),
        (f"{base}.subGroupSets[2].subGroups", "unknown subgroups: zz"),
        (f"{base}.subGroupSets[3]", "must be an object with subGroups (a list) and constraint"),
    ]
    result = validate_podgroup(pg(spec))
    assert [(i.path, i.message) for i in result.errors][:7] == [
        (i.path, i.message) for i in issues]


def test_normalizer_without_plural_is_identity() -> None:
    spec = {"minMember": 1}
    assert normalize_topology_constraints(spec) == ({"minMember": 1}, [])
    assert [(i.path, i.message) for i in normalize_topology_constraints(
        {"topologyConstraints": []})[1]] == [
        ("spec.topologyConstraints", "must be an object with global, subGroups, subGroupSets")]


# ---- properties ---------------------------------------------------------------------------

@st.composite
def valid_trees(draw):
    """Random valid Option-2 trees: leaves minMember > 0, mid-levels minSubGroup in range."""
    count = draw(st.integers(min_value=1, max_value=12))
    parents: list[int | None] = []
    for index in range(count):
        parents.append(draw(st.one_of(st.none(), st.integers(0, index - 1)))
                       if index else None)
    children = {i: [j for j in range(count) if parents[j] == i] for i in range(count)}
    subgroups = []
    for index in range(count):
        entry: dict = {"name": f"sg-{index}"}
        if parents[index] is not None:
            entry["parent"] = f"sg-{parents[index]}"
        if children[index]:
            if draw(st.booleans()):
                entry["minSubGroup"] = draw(st.integers(1, len(children[index])))
        else:
            entry["minMember"] = draw(st.integers(1, 8))
        if draw(st.booleans()):
            entry["topologyConstraint"] = {
                "requiredTopologyLevel": draw(st.sampled_from(["zone", "block", "rack"]))}
        subgroups.append(entry)
    top = [i for i in range(count) if parents[i] is None]
    spec: dict = {"queue": "q", "subGroups": draw(st.permutations(subgroups))}
    if draw(st.booleans()):
        spec["minSubGroup"] = draw(st.integers(1, len(top)))
    leaves = [s["name"] for s in subgroups if "minMember" in s]
    pods = [pod(name, f"{name}-{k}", queue="q")
            for name in leaves for k in range(next(s["minMember"] for s in subgroups
                                                   if s["name"] == name))]
    return spec, pods


@settings(max_examples=150, deadline=None)
@given(valid_trees())
def test_generated_valid_trees_always_validate(tree) -> None:
    spec, pods = tree
    result = validate_podgroup(pg(spec), pods)
    assert result.errors == ()
    assert result.warnings == ()


@settings(max_examples=100, deadline=None)
@given(valid_trees(), st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
       st.booleans())
def test_verdict_is_readiness_independent(tree, phase, ready) -> None:
    spec, pods = tree
    with_status = [{**p, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": str(ready)}]}} for p in pods]
    assert validate_podgroup(pg(spec), with_status) == validate_podgroup(pg(spec), pods)


@settings(max_examples=100, deadline=None)
@given(valid_trees(), st.integers(1, 50))
def test_min_member_beside_min_subgroup_is_always_an_error(tree, member) -> None:
    spec, _ = tree
    spec = {**spec, "minMember": member, "minSubGroup": 1}
    errors = [i.path for i in validate_podgroup(pg(spec)).errors]
    assert errors == ["spec.minMember"]
