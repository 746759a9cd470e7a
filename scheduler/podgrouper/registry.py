"""Plugin registry: one small module per workload kind registers a :class:`Grouper`.

Adding a kind = a module in ``plugins/`` with a ``@register("group", "Kind")`` subclass of
:class:`Grouper` (override :meth:`Grouper.metadata` for the gang and :meth:`Grouper.expand`
for the pods it creates), imported from ``plugins/__init__.py``. Kinds match by API group and
kind, any version. Unknown kinds get :class:`Grouper` itself: the default grouper.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from scheduler.core.kai_names import dns_label

from .model import TRAIN, OwnerRef, PodGroupMeta, SubGroupSpec, WorkloadError
from .owners import OwnerChain, group_kind

_INTEGER = re.compile(r"-?[0-9]+")

GROUPERS: dict[tuple[str, str], Grouper] = {}
INT32_MAX = 2**31 - 1  # Kubernetes count fields are int32
# [pods one expansion may still create, its limit]; set by `pod_budget` (None: unbounded).
_pods_left: ContextVar[list[int] | None] = ContextVar("pods_left", default=None)


@contextmanager
def pod_budget(max_pods: int) -> Iterator[None]:
    """Within this block, expansions create at most ``max_pods`` pods in all: a Job with
    ``parallelism: 2147483647`` is refused after ``max_pods`` pods, not built."""
    token = _pods_left.set([max_pods, max_pods])
    try:
        yield
    finally:
        _pods_left.reset(token)


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def podgroup_name_for(base: str) -> str:
    """KAI's ``pg-<name>`` (KAI appends the owner's UID; a submitted manifest has none, and
    the caller makes ``base`` unique), shortened to a DNS label when needed."""
    return dns_label(f"pg-{base}")


def ascii_int(text: str) -> int | None:
    """`text` as an integer when it is an optional minus and ASCII digits, else None (int()
    also reads '８' as 8, and '1_000')."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else None


def int_field(value: Any, path: str, *, minimum: int = 0) -> int:
    """An integer manifest field (ints or digit strings), else ``invalid_spec``."""
    if isinstance(value, str) and ascii_int(value) is not None:
        value = ascii_int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorkloadError("invalid_spec", f"{path} must be an integer ≥ {minimum}, "
                                            f"got {value!r}", {path: [f"Must be ≥ {minimum}."]})
    if value > INT32_MAX:
        raise WorkloadError("invalid_spec", f"{path} must be at most {INT32_MAX}, got {value}",
                            {path: [f"Must be ≤ {INT32_MAX}."]})
    return value


def replica_count(specs: Mapping[str, Any], role: str, path: str) -> int:
    """Replicas of one role of a Kubeflow job (`{role: {replicas}}`); unset means 1."""
    if role not in specs:
        return 0
    value = (specs.get(role) or {}).get("replicas")
    return 1 if value is None else int_field(value, f"{path}.{role}.replicas")


def nested(obj: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def make_pod(owner: Mapping[str, Any], template: Mapping[str, Any] | None, name: str, *,
             labels: Mapping[str, str] | None = None,
             owner_ref: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A Pod from a pod template, owned by ``owner_ref`` (default: ``owner``)."""
    budget = _pods_left.get()
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            limit = budget[1]
            raise WorkloadError("too_many_pods", f"The workload makes more than {limit} pods.",
                                {"body": [f"At most {limit} pods per workload."]})
    template = template or {}
    metadata = template.get("metadata") or {}
    ref_source = owner_ref if owner_ref is not None else owner
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": dns_label(name),
            "labels": {**dict(metadata.get("labels") or {}), **dict(labels or {})},
            "annotations": dict(metadata.get("annotations") or {}),
            "ownerReferences": [{"apiVersion": ref_source.get("apiVersion"),
                                 "kind": ref_source.get("kind"),
                                 "name": name_of(ref_source), "controller": True}],
        },
        "spec": spec,
    }


def make_owner(owner: Mapping[str, Any], api_version: str, kind: str, name: str,
               labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An intermediate object a controller would create (ReplicaSet, Job, PodClique)."""
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": dns_label(name), "labels": dict(labels or {}),
                         "ownerReferences": [{"apiVersion": owner.get("apiVersion"),
                                              "kind": owner.get("kind"), "name": name_of(owner),
                                              "controller": True}]}}


class Grouper:
    """The default grouper: one PodGroup per top owner, minMember 1, class ``train``."""

    name = "default"
    default_priority_class = TRAIN

    def metadata(self, top: Mapping[str, Any], pod: Mapping[str, Any],
                 chain: OwnerChain) -> PodGroupMeta:
        return self.meta(top, name=podgroup_name_for(name_of(top)), min_member=1)

    def meta(self, top: Mapping[str, Any], *, name: str, min_member: int,
             subgroups: tuple[SubGroupSpec, ...] = (), subgroup: str | None = None
             ) -> PodGroupMeta:
        return PodGroupMeta(name=name, min_member=min_member,
                            priority_class=self.default_priority_class, owner=OwnerRef.of(top),
                            grouper=self.name, subgroups=subgroups, subgroup=subgroup)

    def expand(self, owner: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The objects the owner's controller would create: intermediate owners and Pods.

        Default: a pod template at ``spec.template`` × ``spec.replicas`` (default 1);
        anything else cannot be expanded (``invalid_spec``)."""
        template = nested(owner, "spec", "template")
        if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
            group, kind = group_kind(owner)
            raise WorkloadError(
                "invalid_spec",
                f"cannot tell which pods a {kind or 'manifest'} ({group or 'core'}) creates: "
                "submit a supported kind, its pods, or a PodGroup with its pods",
                {"kind": [f"Unsupported kind {kind!r}."]})
        replicas = nested(owner, "spec", "replicas")
        count = 1 if replicas is None else int_field(replicas, "spec.replicas")
        return [make_pod(owner, template, f"{name_of(owner)}-{i}") for i in range(count)]


DEFAULT_GROUPER = Grouper()


def register(group: str, kind: str, *more: tuple[str, str]) -> Callable[[type], type]:
    """Class decorator: one instance serves ``(group, kind)`` and every pair in ``more``."""

    def wrap(cls: type) -> type:
        instance = cls()
        for key in ((group, kind), *more):
            GROUPERS[key] = instance
        return cls

    return wrap
