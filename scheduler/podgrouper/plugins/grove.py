"""Grove PodCliqueSet: one gang (``pg-{set}-{replica}``) per replica, class ``train``.

Each PodClique of ``spec.template.cliques`` is a leaf subgroup whose minMember is its
``spec.minAvailable`` (default: its replicas); the root minMember is their sum. Expanded as
the Grove operator does: PodCliques ``{set}-{replica}-{clique}`` own the pods. Scaling groups
(``podCliqueScalingGroupConfigs``) are not modelled.
"""

from __future__ import annotations

from ..model import SubGroupSpec, WorkloadError
from ..registry import (
    Grouper,
    int_field,
    labels_of,
    make_owner,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
)

REPLICA_INDEX_LABEL = "grove.io/podcliqueset-replica-index"
CLIQUE_LABEL = "grove.io/podclique"


def _cliques(owner):
    cliques = nested(owner, "spec", "template", "cliques")
    if not isinstance(cliques, list) or not cliques:
        raise WorkloadError("invalid_spec", f"PodCliqueSet {name_of(owner)} has no cliques",
                            {"spec.template.cliques": ["Required, at least one."]})
    out = []
    for index, clique in enumerate(cliques):
        path = f"spec.template.cliques[{index}].spec"
        spec = clique.get("spec") or {}
        replicas = spec.get("replicas")
        replicas = 1 if replicas is None else int_field(replicas, f"{path}.replicas")
        minimum = spec.get("minAvailable")
        minimum = replicas if minimum is None else int_field(minimum, f"{path}.minAvailable",
                                                             minimum=1)
        out.append((str(clique.get("name", "")), replicas, minimum, spec))
    return out


@register("grove.io", "PodCliqueSet", ("grove.io", "PodGangSet"))
class PodCliqueSetGrouper(Grouper):
    name = "grove"

    def metadata(self, top, pod, chain):
        labels = labels_of(pod)
        replica = labels.get(REPLICA_INDEX_LABEL)
        if replica is None:
            raise WorkloadError("invalid_spec", f"pod {name_of(pod)} of PodCliqueSet "
                                f"{name_of(top)} has no {REPLICA_INDEX_LABEL} label",
                                {f"metadata.labels.{REPLICA_INDEX_LABEL}": ["Required."]})
        subgroups = tuple(SubGroupSpec(name, min_member=max(1, minimum))
                          for name, _, minimum, _ in _cliques(top))
        return self.meta(top, name=podgroup_name_for(f"{name_of(top)}-{replica}"),
                         min_member=sum(s.min_member for s in subgroups), subgroups=subgroups,
                         subgroup=labels.get(CLIQUE_LABEL))

    def expand(self, owner):
        spec = nested(owner, "spec") or {}
        replicas = spec.get("replicas")
        count = 1 if replicas is None else int_field(replicas, "spec.replicas")
        objects = []
        for replica in range(count):
            for name, clique_replicas, _, clique_spec in _cliques(owner):
                labels = {REPLICA_INDEX_LABEL: str(replica), CLIQUE_LABEL: name}
                clique = make_owner(owner, "grove.io/v1alpha1", "PodClique",
                                    f"{name_of(owner)}-{replica}-{name}", labels=labels)
                objects.append(clique)
                template = {"metadata": {}, "spec": clique_spec.get("podSpec") or {}}
                for index in range(clique_replicas):
                    objects.append(make_pod(clique, template, f"{name_of(clique)}-{index}",
                                            labels=labels))
        return objects
