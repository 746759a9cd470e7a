"""LeaderWorkerSet: one gang (PodGroup ``pg-{lws}-{group}``) per group, class ``train``.

Subgroups ``leader`` (minMember 1) and ``workers`` (minMember size − 1, when size > 1); the
root minMember is ``size``: a group is useless without all its members. Pods: leader
``{lws}-{group}``, workers ``{lws}-{group}-{index}`` (index 1..size-1), labelled with the
group and worker index as the LWS controller does. (The controller's StatefulSets are not
modelled: pods are owned by the LeaderWorkerSet directly.)
"""

from __future__ import annotations

from ..model import SubGroupSpec, WorkloadError
from ..registry import (
    Grouper,
    ascii_int,
    int_field,
    labels_of,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
)

GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def _size(spec) -> int:
    value = nested(spec, "leaderWorkerTemplate", "size")
    return 1 if value is None else int_field(value, "spec.leaderWorkerTemplate.size", minimum=1)


@register("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
class LeaderWorkerSetGrouper(Grouper):
    name = "leaderworkerset"

    def metadata(self, top, pod, chain):
        size = _size(nested(top, "spec") or {})
        labels = labels_of(pod)
        group = labels.get(GROUP_INDEX_LABEL)
        if group is None or ascii_int(str(group)) is None:
            raise WorkloadError("invalid_spec", f"pod {name_of(pod)} of LeaderWorkerSet "
                                f"{name_of(top)} has no {GROUP_INDEX_LABEL} label",
                                {f"metadata.labels.{GROUP_INDEX_LABEL}": ["Required."]})
        subgroups = [SubGroupSpec("leader", min_member=1)]
        if size > 1:
            subgroups.append(SubGroupSpec("workers", min_member=size - 1))
        is_leader = labels.get(WORKER_INDEX_LABEL, "0") == "0"
        return self.meta(top, name=podgroup_name_for(f"{name_of(top)}-{group}"),
                         min_member=size, subgroups=tuple(subgroups),
                         subgroup="leader" if is_leader else "workers")

    def expand(self, owner):
        spec = nested(owner, "spec") or {}
        replicas = spec.get("replicas")
        groups = 1 if replicas is None else int_field(replicas, "spec.replicas")
        size = _size(spec)
        template = spec.get("leaderWorkerTemplate") or {}
        worker_template = template.get("workerTemplate")
        leader_template = template.get("leaderTemplate") or worker_template
        pods = []
        for group in range(groups):
            for index in range(size):
                name = f"{name_of(owner)}-{group}" + (f"-{index}" if index else "")
                pods.append(make_pod(owner, leader_template if index == 0 else worker_template,
                                     name, labels={GROUP_INDEX_LABEL: str(group),
                                                   WORKER_INDEX_LABEL: str(index)}))
        return pods
