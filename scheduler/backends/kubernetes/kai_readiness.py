"""What KAI placement (``OSMO_PLACEMENT=kai``) needs from the cluster, checked by the backend
leader: KAI's CRDs, the OSMO PriorityClasses, and a KAI scheduler that acts on our PodGroups.

- The CRDs through discovery (``GET /apis/<group>/<version>``, open to every authenticated
  client): without them a PodGroup, a Queue or a Topology cannot be created, and KAI does not
  bind (``bindrequests``).
- The PriorityClasses by name (``get priorityclasses``, in the backend's ClusterRole): a pod
  naming a missing one is refused by the API server's admission.
- A running scheduler, from what it leaves on our objects: a group whose objects all exist
  for ``SILENT_AFTER_SECONDS`` while no pod of it is bound and KAI has given no reason is one
  no scheduler acts on. Chosen over KAI's leader lease (only there with leader election on,
  and in KAI's namespace, which the backend may not read) and over a probe of its port (not
  reachable from every backend): it needs no extra access, and it is what users suffer.

:func:`requirements_missing` returns the missing parts as short sentences; the leader keeps
them on its health row (``/api/health``'s ``placement``, ``osmo_backend_placement_missing``),
and :func:`silent_groups` gives ``explain`` its reason for each group nobody acts on.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from scheduler.models import GroupDispatch
from workflows.models import Task, TaskStatus

from .client import Kube
from .kai_requirements import cluster_missing

SILENT_AFTER_SECONDS = 60.0
PLACEMENT_REQUIREMENTS = ("crd", "priorityclass", "scheduler")


def silent_groups(now: datetime | None = None):
    """The groups (``GroupDispatch`` rows) whose objects all exist for SILENT_AFTER_SECONDS,
    none of whose pods is bound, and for which KAI has given no reason."""
    since = (now or timezone.now()) - timedelta(seconds=SILENT_AFTER_SECONDS)
    bound = Task.objects.filter(node_name__gt="").values("group_id")
    return GroupDispatch.objects.filter(
        group__status=TaskStatus.SCHEDULING, cleaned_at__isnull=True, applied_at__lte=since,
        reasons=[]).exclude(group_id__in=bound)


def silent_words(count: int) -> str:
    return (f"no scheduler has acted on {count} PodGroup(s) for over "
            f"{SILENT_AFTER_SECONDS:.0f} s: is KAI Scheduler running (schedulerName "
            f"{settings.OSMO_SCHEDULER_NAME})?")


def silent_reason() -> dict[str, str]:
    """The reason ``explain`` gives a group no scheduler acts on."""
    return {"code": "scheduler_silent",
            "message": f"no scheduler has bound a pod of this PodGroup or said why for over "
                       f"{SILENT_AFTER_SECONDS:.0f} s: is KAI Scheduler running "
                       f"(schedulerName {settings.OSMO_SCHEDULER_NAME})?"}


def requirements_missing(kube: Kube, now: datetime | None = None) -> list[dict[str, str]]:
    """What KAI placement lacks on the cluster: ``[{requirement, detail}]``, requirement one
    of ``crd``, ``priorityclass``, ``scheduler``; empty when it has it all (or the product
    places the pods itself, ``OSMO_PLACEMENT=osmo``)."""
    if settings.OSMO_PLACEMENT != "kai":
        return []
    missing = cluster_missing(kube)
    silent = silent_groups(now).count()
    if silent:
        missing.append({"requirement": "scheduler", "detail": silent_words(silent)})
    return missing
