"""Admission under concurrency, on real connections (one per thread): submissions racing
subpool creation and deletion never leave the database inconsistent."""

from __future__ import annotations

import threading
import time

import pytest

from osmo.errors import OsmoError
from pools import services as pool_services
from pools.models import Pool, PoolEvent
from tests import factories
from tests.races import errors_of, together
from tests.workflows.conftest import gpu_spec
from workflows.admission import workflow_submit
from workflows.models import Workflow


@pytest.mark.django_db(transaction=True)
def test_parent_submissions_never_exceed_the_unallocated_share_at_their_time():
    team = factories.pool("team", 100)
    outcomes: list[tuple[str, str]] = []
    carved = threading.Event()

    def submitter():
        # Keep submitting while the subpools are carved out, then three more times.
        after, deadline = 0, time.monotonic() + 60
        while time.monotonic() < deadline:
            after += carved.is_set()
            if after > 3:
                break
            try:
                admitted = workflow_submit(actor=None, pool=Pool.objects.get(pk=team.pk),
                                           source=gpu_spec(11, "big"), priority="NORMAL")
                outcomes.append(("ok", admitted.workflow.name))
            except OsmoError as error:
                outcomes.append((error.code, ""))

    def carve():
        for name, quota in (("a", 60), ("b", 30)):
            time.sleep(0.05)
            pool_services.subpool_create(actor=None, parent=Pool.objects.get(pk=team.pk),
                                         subpool_name=name, quota_gpus=quota)
        carved.set()

    assert errors_of(together([submitter, submitter, submitter, carve])) == []
    codes = {code for code, _ in outcomes}
    assert codes <= {"ok", "exceeds_unallocated"}
    assert "exceeds_unallocated" in codes  # the race really crossed the limit
    b_created = PoolEvent.objects.get(pool__name="team--b", action="subpool_created").at
    accepted = Workflow.objects.filter(name__in=[n for code, n in outcomes if code == "ok"])
    assert accepted.count() == sum(code == "ok" for code, _ in outcomes)
    # With b in place only 10 GPUs are unallocated: every 11-GPU workflow was admitted before.
    assert all(w.submitted_at < b_created for w in accepted)


@pytest.mark.django_db(transaction=True)
def test_submissions_racing_a_subpool_delete_leave_nothing_pending():
    team = factories.pool("team", 100)
    sub = factories.subpool(team, "a", 50)
    outcomes: list[str] = []

    def submitter():
        for _ in range(10):
            try:
                workflow_submit(actor=None, pool=Pool.objects.select_related("parent")
                                .get(pk=sub.pk), source=gpu_spec(1), priority="NORMAL")
                outcomes.append("ok")
            except OsmoError as error:
                outcomes.append(error.code)

    def delete():
        pool_services.subpool_delete(actor=None, subpool=Pool.objects.select_related("parent")
                                     .get(pk=sub.pk))

    assert errors_of(together([submitter, submitter, submitter, delete])) == []
    assert set(outcomes) <= {"ok", "subpool_not_active"}
    sub.refresh_from_db()
    assert sub.subpool_state == "ARCHIVED"
    workflows = Workflow.objects.filter(pool=sub)
    assert workflows.count() == outcomes.count("ok")
    # Everything admitted before the delete was canceled by it; nothing got in after.
    assert set(workflows.values_list("status", "reason")) <= {
        ("FAILED_CANCELED", "subpool_deleted")}
