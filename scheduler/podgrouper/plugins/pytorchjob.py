"""Kubeflow PyTorchJob, class ``train``: one PodGroup with subgroups ``master`` and ``worker``.

minMember = ``spec.runPolicy.schedulingPolicy.minAvailable``, else
``spec.elasticPolicy.minReplicas``, else all replicas (as KAI, minAvailable wins).
``master`` needs all its replicas; ``worker`` needs minMember − masters, but at least 1 (our
webhook requires every leaf to gang on something; KAI would allow 0 there), so the gang always
holds the master(s) and one worker. The root minMember is the sum of the leaves'.
"""

from __future__ import annotations

from ..model import SubGroupSpec
from ..registry import (
    Grouper,
    int_field,
    labels_of,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
    replica_count,
)

REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
ROLES = (("Master", "master"), ("Worker", "worker"))


def _replicas(specs, role: str) -> int:
    return replica_count(specs, role, "spec.pytorchReplicaSpecs")


@register("kubeflow.org", "PyTorchJob")
class PyTorchJobGrouper(Grouper):
    name = "pytorchjob"

    def metadata(self, top, pod, chain):
        spec = nested(top, "spec") or {}
        specs = spec.get("pytorchReplicaSpecs") or {}
        masters, workers = _replicas(specs, "Master"), _replicas(specs, "Worker")
        wanted = nested(spec, "runPolicy", "schedulingPolicy", "minAvailable")
        path = "spec.runPolicy.schedulingPolicy.minAvailable"
        if wanted is None:
            wanted = nested(spec, "elasticPolicy", "minReplicas")
            path = "spec.elasticPolicy.minReplicas"
        total = masters + workers if wanted is None else int_field(wanted, path, minimum=1)
        subgroups = []
        if masters:
            subgroups.append(SubGroupSpec("master", min_member=masters if workers
                                          else max(1, min(total, masters))))
        if workers:
            subgroups.append(SubGroupSpec("worker", min_member=max(1, total - masters)))
        role = labels_of(pod).get(REPLICA_TYPE_LABEL)
        return self.meta(top, name=podgroup_name_for(name_of(top)),
                         min_member=sum(s.min_member or 0 for s in subgroups) or 1,
                         subgroups=tuple(subgroups),
                         subgroup=role if role in ("master", "worker") else None)

    def expand(self, owner):
        specs = nested(owner, "spec", "pytorchReplicaSpecs") or {}
        pods = []
        for role, label in ROLES:
            for index in range(_replicas(specs, role)):
                pods.append(make_pod(owner, (specs.get(role) or {}).get("template"),
                                     f"{name_of(owner)}-{label}-{index}",
                                     labels={REPLICA_TYPE_LABEL: label,
                                             REPLICA_INDEX_LABEL: str(index)}))
        return pods
