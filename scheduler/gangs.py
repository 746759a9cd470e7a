"""A group's gang fields (``WorkflowGroup.gang``: the PodGroup's ``minMember``,
``minSubGroup``, ``subGroups``, ``topologyConstraint``) as a ``scheduler.core`` Gang: the one
reading the scheduling loop and the PodGroup's status share."""

from __future__ import annotations

from typing import Any

from scheduler.core import Gang, Pod, SubGroup, TopologyConstraint


def constraint_of(raw: dict | None) -> TopologyConstraint | None:
    if not raw:
        return None
    return TopologyConstraint(required_level=raw.get("requiredTopologyLevel"),
                              preferred_level=raw.get("preferredTopologyLevel"))


def gang_of(name: str, fields: dict[str, Any], pods: tuple[Pod, ...], *, queue: str = "",
            **attributes) -> Gang:
    return Gang(
        name=name, queue=queue,
        min_member=fields.get("minMember"), min_subgroup=fields.get("minSubGroup"),
        subgroups=tuple(SubGroup(name=s["name"], parent=s.get("parent"),
                                 min_member=s.get("minMember"),
                                 min_subgroup=s.get("minSubGroup"),
                                 topology=constraint_of(s.get("topologyConstraint")))
                        for s in fields.get("subGroups", ())),
        topology=constraint_of(fields.get("topologyConstraint")), pods=pods, **attributes)
