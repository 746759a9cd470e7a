"""`osmo_scheduler_time_to_first_bind_seconds` on Kubernetes with ``OSMO_PLACEMENT=osmo``: a
cycle's bindings count for the workflows whose first pod they bound — not a gang that had a pod
bound already, not a workflow that started, not a workflow this process counted before."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from scheduler.backends.kubernetes.runner import first_binds
from scheduler.backends.kubernetes.snapshot import ClusterIndex
from scheduler.core import Gang, Pod
from scheduler.core.kai_names import WORKFLOW_NAME_ANNOTATION
from scheduler.core.results import Binding, CycleResult
from tests import factories
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def cycle(*gangs: tuple[str, str, bool]) -> SimpleNamespace:
    """A placement whose last cycle bound one pod of each (gang, workflow, had a pod bound)."""
    index, bindings = ClusterIndex(), []
    for gang, workflow, started in gangs:
        index.gangs[gang] = Gang(gang, "q", pods=(
            Pod(f"{gang}-0", gpus=1), Pod(f"{gang}-1", gpus=1, node="n2" if started else None)))
        index.podgroups[gang] = {"metadata": {"name": gang, "annotations": {
            WORKFLOW_NAME_ANNOTATION: workflow}}}
        bindings.append(Binding(f"{gang}-0", gang, "n1"))
    return SimpleNamespace(last_index=index, last_result=CycleResult(
        now=0.0, bindings=tuple(bindings), evictions=(), explanations=(), queues=(), stale=()))


def test_each_workflow_counts_once_at_its_first_bind() -> None:
    pool = factories.pool("team", 8)
    fresh, high, started, counted = (factories.pending_workflow(pool, 1, priority)
                                     for priority in ("NORMAL", "HIGH", "NORMAL", "LOW"))
    Workflow.objects.filter(pk=fresh.pk).update(
        submitted_at=timezone.now() - timedelta(seconds=30))
    Workflow.objects.filter(pk=started.pk).update(started_at=timezone.now())
    seen = {counted.name: None}
    observed = first_binds(cycle(("ns/a", fresh.name, False), ("ns/b", high.name, False),
                                 ("ns/c", started.name, False), ("ns/d", counted.name, False),
                                 ("ns/e", fresh.name, True), ("ns/f", "unknown", False)), seen)
    assert sorted(priority for priority, _ in observed) == ["HIGH", "NORMAL"]
    seconds = dict(observed)
    assert 30 <= seconds["NORMAL"] < 60 and 0 <= seconds["HIGH"] < 30
    assert set(seen) == {counted.name, fresh.name, high.name}
    assert first_binds(cycle(("ns/g", fresh.name, False)), seen) == []  # counted already
