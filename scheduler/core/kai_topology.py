"""A ``topologyConstraint`` as KAI v0.17 reads it. Pure.

KAI drops a constraint that names no Topology, and matches a level only by its node label (an
alias such as ``rack`` is ours). So a constraint on the cluster Topology is emitted naming it,
its levels given by alias turned into their node labels; a constraint that names another
Topology is left as it is (its levels are that Topology's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .kai_names import DEFAULT_TOPOLOGY_NAME

LEVEL_KEYS = ("preferredTopologyLevel", "requiredTopologyLevel")


def constraint_for_kai(constraint: Mapping[str, Any], levels: Iterable[Mapping[str, Any]], *,
                       name: str = DEFAULT_TOPOLOGY_NAME) -> dict[str, Any]:
    """``constraint`` resolved against the cluster Topology ``name`` of ``levels``
    (``{alias, nodeLabel}``, coarsest first). One that names no level stays as it is (it
    constrains nothing)."""
    out = dict(constraint)
    if not any(out.get(key) for key in LEVEL_KEYS) or out.get("topology", name) != name:
        return out
    labels = {level.get("alias"): level["nodeLabel"] for level in levels if level.get("alias")}
    for key in LEVEL_KEYS:
        if out.get(key):
            out[key] = labels.get(out[key], out[key])
    out["topology"] = name
    return out
