"""From a pod (plus its owners) or a whole workload manifest to PodGroups and Pods. Pure.

:func:`group_pod` is the pod grouper proper (seed 004): owner walk, the top owner's plugin,
then the rules every plugin shares:

- priority class: the pod's ``spec.priorityClassName``, else label ``priorityClassName`` on the
  top owner, else on the pod, else the plugin's default (KAI's order);
- queue: label ``kai.scheduler/queue`` on the top owner, then the pod, then the caller's
  default (the pool's leaf queue);
- preemptibility: label ``kai.scheduler/preemptibility`` on the top owner, then the pod; else
  derived from the class value (< 100 preemptible), and always written out explicitly;
- topology: annotations ``kai.scheduler/topology``, ``...-required-placement``,
  ``...-preferred-placement`` of the top owner, else of the pod (taken as a unit). Without
  ``kai.scheduler/topology`` the constraint names no Topology, so the cluster's
  ``osmo-topology`` applies (SCHEDULING.md).

:func:`group_workload` expands a submitted manifest (any kind, or a ``List``) into the pods its
controllers would create, groups them, and returns PodGroup + Pod manifests in the conventions
of :mod:`scheduler.kai.podgroups` (labels ``kai.scheduler/queue`` and
``kai.scheduler/subgroup-name``, annotations ``pod-group-name`` and
``kai.scheduler/skip-podgrouper``, ``priorityClassName`` and ``preemptibility``).

Decisions where the documents are silent:

- In a ``List``, an item that another item names as its controller owner is not expanded: its
  children are (they are what creates pods), and the owner walk goes up through it — so an
  Argo Workflow listed with the PyTorchJob it owns groups as the PyTorchJob (skip-top-owner),
  and a Job listed with its own Pods uses those Pods.
- A ``scheduling.run.ai/v2alpha2`` PodGroup in the list is taken as given (KAI's external
  PodGroups): it and its pods keep their names (``name_prefix`` does not apply to them); its
  pods are the listed Pods annotated ``pod-group-name: <its name>``; its queue
  becomes the caller's default queue; a missing class becomes ``train``; seed 001's plural
  ``topologyConstraints`` is folded into the CRD's singular ``topologyConstraint`` fields. It
  must pass the webhook rules with its pods, else :class:`WorkloadError` ``invalid_podgroup``.
- Generated PodGroups are checked by the same rules (errors → ``invalid_podgroup``; warnings
  are returned).
- Everything is placed in the caller's ``namespace`` (tenancy is by pool, not namespace).
  ``ownerReferences`` are dropped from the emitted pods (their owners are never created; the
  owner is kept in annotations ``osmo/owner-kind`` / ``osmo/owner-name``).
- A resolved queue outside ``allowed_queues`` (when given) is ``invalid_spec``: a label must not
  move work into another pool's queue behind admission's back.
- OSMO priority from the class value: ≥ 125 HIGH, ≥ 100 NORMAL, else LOW; an explicit
  preemptibility wins (preemptible → LOW; non-preemptible → HIGH at ≥ 125, else NORMAL).
  Unknown classes are ``invalid_spec`` (a cluster would reject the pods). The workload's
  priority is its highest group's. ``priority=`` (the API's ``?priority=``) replaces every
  group's class by ``osmo-high|normal|low`` and its preemptibility.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.core.decode import QuantityError, pod_requests
from scheduler.core.kai_names import (
    GROUPER_ANNOTATION,
    IMPLICIT_SUBGROUP,
    OWNER_KIND_ANNOTATION,
    OWNER_NAME_ANNOTATION,
    QUEUE_LABEL,
    SKIP_PODGROUPER_ANNOTATION,
    SUBGROUP_LABEL,
    dns_label,
    label_value,
)
from scheduler.core.podgroup_validation import (
    PODGROUP_ANNOTATION,
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    Issue,
    normalize_topology_constraints,
    subgroup_count,
    validate_podgroup,
)
from scheduler.kai.podgroups import DEFAULT_SCHEDULER_NAME, GroupManifests, priority_class

from .kinds import grouper_for
from .model import (
    PREEMPTIBILITY_LABEL,
    PREFERRED_PLACEMENT_ANNOTATION,
    PRIORITY_LABEL,
    REQUIRED_PLACEMENT_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    TRAIN,
    PodGroupMeta,
    TopologySpec,
    WorkloadError,
)
from .owners import Lookup, controller_ref, group_kind, index_lookup, owner_chain
from .registry import annotations_of, labels_of, name_of, pod_budget

KNOWN_PRIORITY_CLASSES: dict[str, int] = {
    "osmo-high": 125, "osmo-normal": 100, "osmo-low": 50, "inference": 125, "build": 100,
    "build-preemptible": 75, "train": 50,
}
PREEMPTIBLE, NON_PREEMPTIBLE = "preemptible", "non-preemptible"
PRIORITY_ORDER = {"LOW": 0, "NORMAL": 1, "HIGH": 2}


# --- priorities -----------------------------------------------------------------------------

def priority_from_class(value: int, preemptibility: str | None = None) -> str:
    """OSMO priority of a PriorityClass value (API.md "Cluster and scheduler")."""
    if preemptibility == PREEMPTIBLE:
        return "LOW"
    if value >= 125:
        return "HIGH"
    if value >= 100 or preemptibility == NON_PREEMPTIBLE:
        return "NORMAL"
    return "LOW"


def default_preemptibility(value: int) -> str:
    """KAI's rule: classes below 100 are preemptible."""
    return PREEMPTIBLE if value < 100 else NON_PREEMPTIBLE


def class_value(name: str, classes: Mapping[str, int]) -> int:
    if name not in classes:
        raise WorkloadError("invalid_spec",
                            f"unknown PriorityClass '{name}' (known: {', '.join(sorted(classes))})",
                            {"priorityClassName": [f"Unknown PriorityClass '{name}'."]})
    return classes[name]


# --- one pod --------------------------------------------------------------------------------

def _preemptibility_label(*objects: Mapping[str, Any]) -> str | None:
    for obj in objects:
        value = labels_of(obj).get(PREEMPTIBILITY_LABEL)
        if value is not None:
            if value not in (PREEMPTIBLE, NON_PREEMPTIBLE):
                raise WorkloadError("invalid_spec", f"label {PREEMPTIBILITY_LABEL} must be "
                                    f"'{PREEMPTIBLE}' or '{NON_PREEMPTIBLE}', got '{value}'",
                                    {f"metadata.labels.{PREEMPTIBILITY_LABEL}": ["Invalid."]})
            return value
    return None


def _topology(*objects: Mapping[str, Any]) -> TopologySpec | None:
    keys = (TOPOLOGY_ANNOTATION, REQUIRED_PLACEMENT_ANNOTATION, PREFERRED_PLACEMENT_ANNOTATION)
    for obj in objects:
        annotations = annotations_of(obj)
        if any(annotations.get(key) for key in keys):
            if not (annotations.get(REQUIRED_PLACEMENT_ANNOTATION)
                    or annotations.get(PREFERRED_PLACEMENT_ANNOTATION)):
                return None  # a Topology name alone constrains nothing
            return TopologySpec(topology=annotations.get(TOPOLOGY_ANNOTATION) or None,
                                required_level=annotations.get(REQUIRED_PLACEMENT_ANNOTATION)
                                or None,
                                preferred_level=annotations.get(PREFERRED_PLACEMENT_ANNOTATION)
                                or None)
    return None


def group_pod(pod: Mapping[str, Any], lookup: Lookup | Iterable[Mapping[str, Any]] = (), *,
              default_queue: str | None = None) -> PodGroupMeta:
    """The PodGroup of ``pod``. ``lookup``: a function ``(apiVersion, kind, name) → owner``
    or simply the owner objects."""
    if not callable(lookup):
        lookup = index_lookup(lookup)
    chain = owner_chain(pod, lookup)
    top = chain.top
    effective_pod = chain.pod
    meta = grouper_for(top).metadata(top, effective_pod, chain)
    pclass = ((effective_pod.get("spec") or {}).get("priorityClassName")
              or labels_of(top).get(PRIORITY_LABEL)
              or labels_of(effective_pod).get(PRIORITY_LABEL)
              or meta.priority_class)
    queue = (labels_of(top).get(QUEUE_LABEL) or labels_of(effective_pod).get(QUEUE_LABEL)
             or default_queue)
    return dataclasses.replace(
        meta, priority_class=pclass, queue=queue,
        preemptibility=_preemptibility_label(top, effective_pod),
        topology=_topology(top, effective_pod), labels=labels_of(top))


# --- a whole workload -----------------------------------------------------------------------

def pod_gpus(pod: Mapping[str, Any]) -> int:
    """Whole GPUs a pod asks for, as the scheduler counts them (``scheduler.core.decode``:
    requests, else limits; sidecars with the containers; the largest init container when more);
    a quantity that is not one is ``invalid_spec``."""
    try:
        return pod_requests(pod, strict=True).gpus
    except QuantityError as error:
        raise WorkloadError("invalid_spec", error.detail, {error.field: ["Invalid."]}) from None


@dataclass(frozen=True)
class WorkloadGroup:
    """One PodGroup of a workload with its pods, OSMO priority and GPU total."""

    manifests: GroupManifests
    priority: str
    priority_class: str
    gpus: int
    grouper: str
    warnings: tuple[Issue, ...] = ()

    @property
    def name(self) -> str:
        return self.manifests.podgroup["metadata"]["name"]

    @property
    def pod_names(self) -> list[str]:
        return [pod["metadata"]["name"] for pod in self.manifests.pods]


@dataclass(frozen=True)
class WorkloadGrouping:
    groups: tuple[WorkloadGroup, ...]
    priority: str

    @property
    def pod_names(self) -> list[str]:
        return [name for group in self.groups for name in group.pod_names]

    @property
    def gpus(self) -> int:
        return sum(group.gpus for group in self.groups)

    def manifests(self) -> list[dict[str, Any]]:
        """Each PodGroup followed by its pods (the order to create them in)."""
        return [manifest for group in self.groups for manifest in group.manifests.all()]


def _items(manifest: Any) -> list[Mapping[str, Any]]:
    if isinstance(manifest, Mapping) and manifest.get("kind") == "List":
        raw = manifest.get("items")
        prefix = "items"
    elif isinstance(manifest, Mapping):
        raw, prefix = [manifest], None
    elif isinstance(manifest, Sequence) and not isinstance(manifest, str | bytes):
        raw, prefix = list(manifest), "items"
    else:
        raise WorkloadError("invalid_spec", "a workload is a Kubernetes object or a List",
                            {"kind": ["Expected an object or a List."]})
    if not isinstance(raw, list) or not raw:
        raise WorkloadError("invalid_spec", "the List has no items",
                            {"items": ["At least one item is required."]})
    for index, item in enumerate(raw):
        where = f"{prefix}[{index}]." if prefix else ""
        if not isinstance(item, Mapping):
            raise WorkloadError("invalid_spec", f"item {index} is not an object",
                                {f"{prefix}[{index}]": ["Must be an object."]})
        for field_name in ("apiVersion", "kind"):
            if not isinstance(item.get(field_name), str) or not item.get(field_name):
                raise WorkloadError("invalid_spec", f"{where}{field_name} is required",
                                    {f"{where}{field_name}": ["Required."]})
        if not name_of(item):
            raise WorkloadError("invalid_spec", f"{where}metadata.name is required",
                                {f"{where}metadata.name": ["Required."]})
    return raw


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    group, kind = group_kind(obj)
    return group, kind, name_of(obj)


def _is_podgroup(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == PODGROUP_KIND and \
        str(obj.get("apiVersion", "")).startswith("scheduling.run.ai/")


def _is_pod(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1"


class _Builder:
    def __init__(self, *, namespace: str, default_queue: str,
                 allowed_queues: Iterable[str] | None, priority: str | None,
                 priority_classes: Mapping[str, int], scheduler_name: str,
                 name_prefix: str | None):
        self.namespace = namespace
        self.name_prefix = name_prefix
        self.default_queue = default_queue
        self.allowed_queues = None if allowed_queues is None else set(allowed_queues)
        self.override = priority_class(priority) if priority is not None else None
        self.classes = dict(priority_classes)
        self.scheduler_name = scheduler_name

    def _name(self, name: str) -> str:
        return dns_label(f"{self.name_prefix}-{name}") if self.name_prefix else name

    def _class(self, name: str, preemptibility: str | None) -> tuple[str, str, str]:
        """(class name, preemptibility, OSMO priority)."""
        if self.override is not None:
            return self.override.name, self.override.preemptibility, \
                priority_from_class(self.override.value, self.override.preemptibility)
        value = class_value(name, self.classes)
        chosen = preemptibility or default_preemptibility(value)
        return name, chosen, priority_from_class(value, preemptibility)

    def _pod(self, pod: Mapping[str, Any], *, podgroup: str, queue: str, subgroup: str,
             pclass: str, owner: Mapping[str, Any] | None,
             keep_name: bool = False) -> dict[str, Any]:
        out = copy.deepcopy(dict(pod))
        metadata = out.setdefault("metadata", {})
        metadata.pop("ownerReferences", None)
        metadata.pop("resourceVersion", None)
        metadata.pop("uid", None)
        metadata["name"] = name_of(pod) if keep_name else self._name(name_of(pod))
        metadata["namespace"] = self.namespace
        metadata["labels"] = {**(metadata.get("labels") or {}), QUEUE_LABEL: label_value(queue),
                              SUBGROUP_LABEL: subgroup}
        annotations = {**(metadata.get("annotations") or {}), PODGROUP_ANNOTATION: podgroup,
                       SKIP_PODGROUPER_ANNOTATION: "true"}
        if owner is not None:
            annotations[OWNER_KIND_ANNOTATION] = str(owner.get("kind"))
            annotations[OWNER_NAME_ANNOTATION] = name_of(owner)
        metadata["annotations"] = annotations
        spec = out.setdefault("spec", {})
        spec["schedulerName"] = self.scheduler_name
        spec["priorityClassName"] = pclass
        return out

    def _check_queue(self, queue: str, where: str) -> None:
        if self.allowed_queues is not None and queue not in self.allowed_queues:
            raise WorkloadError(
                "invalid_spec", f"{where} asks for queue '{queue}', which this pool does not "
                f"own (allowed: {', '.join(sorted(self.allowed_queues))})",
                {f"metadata.labels.{QUEUE_LABEL}": [f"Queue '{queue}' is not allowed."]})

    def _finish(self, podgroup: dict[str, Any], pods: list[dict[str, Any]], priority: str,
                pclass: str, grouper: str) -> WorkloadGroup:
        result = validate_podgroup(podgroup, pods)
        if not result.allowed:
            errors: dict[str, list[str]] = {}
            for issue in result.errors:
                errors.setdefault(issue.path or "spec", []).append(issue.message)
            name = podgroup["metadata"]["name"]
            raise WorkloadError("invalid_podgroup", f"PodGroup {name} breaks the PodGroup "
                                f"rules: " + "; ".join(f"{i.path}: {i.message}"
                                                       for i in result.errors), errors)
        return WorkloadGroup(manifests=GroupManifests(podgroup=podgroup, pods=tuple(pods)),
                             priority=priority, priority_class=pclass,
                             gpus=sum(pod_gpus(pod) for pod in pods), grouper=grouper,
                             warnings=result.warnings)

    def given(self, podgroup: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> WorkloadGroup:
        # Taken as given, like KAI's external PodGroups: it and its pods keep their names (no
        # name prefix), so what the user looks up is what they sent.
        given_name = name_of(podgroup)
        name = given_name
        if podgroup.get("apiVersion") != PODGROUP_API_VERSION:
            raise WorkloadError("invalid_podgroup", f"PodGroup {name} must be "
                                f"{PODGROUP_API_VERSION}, got {podgroup.get('apiVersion')}",
                                {"apiVersion": [f"Must be {PODGROUP_API_VERSION}."]})
        if not pods:
            raise WorkloadError("invalid_podgroup", f"PodGroup {name} has no pods in the list "
                                f"(pods name it in annotation {PODGROUP_ANNOTATION})",
                                {"items": [f"No Pod is annotated {PODGROUP_ANNOTATION}: "
                                           f"{given_name}."]})
        out = copy.deepcopy(dict(podgroup))
        metadata = out.setdefault("metadata", {})
        metadata["name"] = name
        metadata["namespace"] = self.namespace
        for key in ("resourceVersion", "uid", "ownerReferences"):
            metadata.pop(key, None)
        metadata["labels"] = {**(metadata.get("labels") or {}),
                              QUEUE_LABEL: label_value(self.default_queue)}
        spec = out.get("spec")
        if not isinstance(spec, dict):
            raise WorkloadError("invalid_podgroup", f"PodGroup {name} has no spec",
                                {"spec": ["Required."]})
        # Seed 001's plural topologyConstraints is no field of the CRD (the API server would
        # prune it): kept, dispatched and shown in the singular form it folds into. A plural
        # form that does not fold stays as sent, for the validation below to report.
        normalized, issues = normalize_topology_constraints(spec)
        if not issues:
            out["spec"] = spec = normalized
        pclass, preemptibility, priority = self._class(spec.get("priorityClassName") or TRAIN,
                                                       spec.get("preemptibility"))
        spec.update(queue=self.default_queue, priorityClassName=pclass,
                    preemptibility=preemptibility)
        has_subgroups = bool(spec.get("subGroups"))
        emitted = []
        for pod in pods:
            labels = labels_of(pod)
            subgroup = labels.get(SUBGROUP_LABEL) or ("" if has_subgroups else IMPLICIT_SUBGROUP)
            emitted.append(self._pod(pod, podgroup=name, queue=self.default_queue,
                                     subgroup=subgroup, pclass=pclass, owner=None,
                                     keep_name=True))
        return self._finish(out, emitted, priority, pclass, "given")

    def grouped(self, meta: PodGroupMeta, pods: list[Mapping[str, Any]],
                owner: Mapping[str, Any]) -> WorkloadGroup:
        queue = meta.queue or self.default_queue
        self._check_queue(queue, f"{meta.owner.kind} {meta.owner.name}")
        meta = dataclasses.replace(meta, name=self._name(meta.name))
        pclass, preemptibility, priority = self._class(meta.priority_class, meta.preemptibility)
        spec: dict[str, Any] = {"queue": queue, "priorityClassName": pclass,
                                "preemptibility": preemptibility, "minMember": meta.min_member}
        if meta.subgroups:
            spec["subGroups"] = [subgroup.to_manifest() for subgroup in meta.subgroups]
        if meta.topology is not None:
            spec["topologyConstraint"] = meta.topology.to_manifest()
        podgroup = {
            "apiVersion": PODGROUP_API_VERSION,
            "kind": PODGROUP_KIND,
            "metadata": {
                "name": meta.name,
                "namespace": self.namespace,
                "labels": {QUEUE_LABEL: label_value(queue)},
                "annotations": {OWNER_KIND_ANNOTATION: meta.owner.kind,
                                OWNER_NAME_ANNOTATION: meta.owner.name,
                                GROUPER_ANNOTATION: meta.grouper},
            },
            "spec": spec,
        }
        emitted = []
        for pod, subgroup in pods:
            emitted.append(self._pod(pod, podgroup=meta.name, queue=queue,
                                     subgroup=subgroup or IMPLICIT_SUBGROUP, pclass=pclass,
                                     owner=owner))
        return self._finish(podgroup, emitted, priority, pclass, meta.grouper)


def group_workload(
    manifest: Any,
    *,
    namespace: str,
    default_queue: str,
    allowed_queues: Iterable[str] | None = None,
    priority: str | None = None,
    priority_classes: Mapping[str, int] | None = None,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    name_prefix: str | None = None,
    max_pods: int = 1_000,
    max_subgroups: int = 256,
) -> WorkloadGrouping:
    """Expand and group a workload manifest (an object, a ``List`` or a list of objects).

    ``default_queue``: the pool's leaf queue (:func:`scheduler.kai.queues.queue_name_for`).
    ``allowed_queues``: queues a ``kai.scheduler/queue`` label may pick (None: any).
    ``priority``: HIGH/NORMAL/LOW to override the class-derived priority.
    ``priority_classes``: name → value, default :data:`KNOWN_PRIORITY_CLASSES`.
    ``name_prefix``: prepended (``{prefix}-``) to every generated PodGroup and Pod name, e.g.
    the unique workload name, so two submissions of a Job ``train`` never collide (names stay
    DNS labels via :func:`scheduler.kai.podgroups.dns_label`). A given PodGroup and its pods
    keep their own names: admission refuses one whose name an alive workload already uses.
    ``max_pods``: the most pods the workload may make (given and expanded), checked while
    expanding (``too_many_pods``); ``max_subgroups``: the most subGroups a given PodGroup may
    list (``too_many_subgroups``).
    Raises :class:`WorkloadError` (``invalid_spec`` / ``invalid_podgroup`` / ``too_many_pods``).
    """
    for item in _items(manifest):
        if _is_podgroup(item) and subgroup_count(item) > max_subgroups:
            raise WorkloadError("too_many_subgroups", f"PodGroup {name_of(item)} lists "
                                f"{subgroup_count(item)} subGroups; at most {max_subgroups}.",
                                {"body": [f"At most {max_subgroups} subgroups."]})
    with pod_budget(max_pods):
        grouping = _group(manifest, namespace, default_queue, allowed_queues, priority,
                          priority_classes, scheduler_name, name_prefix)
    pods = sum(len(group.manifests.pods) for group in grouping.groups)
    if pods > max_pods:
        raise WorkloadError("too_many_pods", f"The workload makes {pods} pods; at most "
                            f"{max_pods}.", {"body": [f"At most {max_pods} pods per workload."]})
    return grouping


def _group(manifest, namespace, default_queue, allowed_queues, priority, priority_classes,
           scheduler_name, name_prefix) -> WorkloadGrouping:
    items = _items(manifest)
    builder = _Builder(namespace=namespace, default_queue=default_queue,
                       allowed_queues=allowed_queues, priority=priority,
                       priority_classes=priority_classes or KNOWN_PRIORITY_CLASSES,
                       scheduler_name=scheduler_name, name_prefix=name_prefix)
    units, attached, universe = _units(items)
    buckets = _buckets(units, attached, index_lookup(universe), default_queue)
    groups = _build_groups(builder, buckets)
    overall = max((group.priority for group in groups), key=PRIORITY_ORDER.__getitem__)
    return WorkloadGrouping(groups=tuple(groups), priority=overall)


Unit = tuple[str, Mapping[str, Any]]  # ("given", podgroup) or ("pod", pod)
Bucket = tuple[str, Any, list]  # a PodGroup's kind of origin, what it came from, its pods


def _owned_keys(items: list[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """(API group, kind, name) of every object an item names as its controller: those are
    expanded through their owner, not on their own."""
    owned = set()
    for item in items:
        ref = controller_ref(item)
        if ref is not None:
            owned.add((str(ref.get("apiVersion", "")).rpartition("/")[0], str(ref.get("kind")),
                       str(ref.get("name"))))
    return owned


def _units(items: list[Mapping[str, Any]]
           ) -> tuple[list[Unit], dict[str, list[Mapping[str, Any]]], list[Mapping[str, Any]]]:
    """Ordered units, ("given", podgroup) or ("pod", pod); the pods attached to each given
    PodGroup; and every object known, the intermediate owners expansions create included."""
    given_names = {name_of(item) for item in items if _is_podgroup(item)}
    owned = _owned_keys(items)
    units: list[Unit] = []
    attached: dict[str, list[Mapping[str, Any]]] = {name: [] for name in given_names}
    universe: list[Mapping[str, Any]] = list(items)
    for index, item in enumerate(items):
        if _is_podgroup(item):
            units.append(("given", item))
        elif _is_pod(item):
            target = annotations_of(item).get(PODGROUP_ANNOTATION)
            if target in attached:
                attached[target].append(item)
            elif target is not None and given_names:
                raise WorkloadError("invalid_podgroup", f"pod {name_of(item)} names PodGroup "
                                    f"'{target}', which is not in the list",
                                    {f"items[{index}].metadata.annotations."
                                     f"{PODGROUP_ANNOTATION}": ["Unknown PodGroup."]})
            else:
                units.append(("pod", item))
        elif _key(item) not in owned:
            created = grouper_for(item).expand(item)
            universe.extend(obj for obj in created if not _is_pod(obj))
            units.extend(("pod", obj) for obj in created if _is_pod(obj))
    return units, attached, universe


def _duplicate_podgroup(name: str) -> WorkloadError:
    return WorkloadError("invalid_spec", f"two PodGroups are named '{name}'",
                         {"items": [f"Duplicate PodGroup name '{name}'."]})


def _buckets(units: list[Unit],
             attached: dict[str, list[Mapping[str, Any]]], lookup: Lookup,
             default_queue: str) -> dict[str, Bucket]:
    """PodGroup name → ("given", podgroup, its pods) or ("grouped", (meta, top owner),
    [(pod, subgroup)]), in the units' order."""
    buckets: dict[str, Bucket] = {}
    for unit_kind, obj in units:
        if unit_kind == "given":
            name = name_of(obj)
            if name in buckets:
                raise _duplicate_podgroup(name)
            buckets[name] = ("given", obj, attached[name])
            continue
        meta = group_pod(obj, lookup, default_queue=default_queue)
        bucket = buckets.get(meta.name)
        if bucket is None:
            chain_top = owner_chain(obj, lookup).top
            buckets[meta.name] = ("grouped", (meta, chain_top), [(obj, meta.subgroup)])
        elif bucket[0] == "given":
            raise _duplicate_podgroup(meta.name)
        else:
            bucket[2].append((obj, meta.subgroup))
    return buckets


def _build_groups(builder: _Builder,
                  buckets: dict[str, Bucket]) -> list[WorkloadGroup]:
    """One WorkloadGroup per bucket; pod names must be unique across the workload."""
    pod_names: set[str] = set()
    groups = []
    for kind_of_bucket, payload, pods in buckets.values():
        if kind_of_bucket == "given":
            group = builder.given(payload, pods)
        else:
            meta, top = payload
            group = builder.grouped(meta, pods, top)
        for pod_name in group.pod_names:
            if pod_name in pod_names:
                raise WorkloadError("invalid_spec", f"two pods are named '{pod_name}'",
                                    {"items": [f"Duplicate pod name '{pod_name}'."]})
            pod_names.add(pod_name)
        groups.append(group)
    return groups
