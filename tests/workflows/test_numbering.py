"""Workflow numbers are taken as a sequence gives them (workflows/numbering.py): a submission
does not wait for a same-named one to commit, racing ones get every number once, and refused
ones take none."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from workflows import admission
from workflows.models import Workflow, WorkflowNameCounter

from .conftest import gpu_spec, submit


def _in_thread(target, name: str) -> threading.Thread:
    def run():
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_submission_does_not_wait_for_a_same_named_one_to_commit(team, user, monkeypatch):
    inserted, release = threading.Event(), threading.Event()
    insert = admission.insert_admitted

    def insert_then_hold(*args, **kwargs):
        insert(*args, **kwargs)
        if threading.current_thread().name == "held":  # its transaction stays open
            inserted.set()
            release.wait(30)

    monkeypatch.setattr(admission, "insert_admitted", insert_then_hold)
    responses = {}
    held = _in_thread(lambda: responses.update(held=submit(user, "team", gpu_spec(1, "same"))),
                      "held")
    try:
        assert inserted.wait(30)
        other = _in_thread(
            lambda: responses.update(other=submit(user, "team", gpu_spec(1, "same"))), "other")
        other.join(5)
        answered_while_held = not other.is_alive()
    finally:
        release.set()
        held.join(30)
    other.join(30)
    assert answered_while_held
    assert {key: (r.status_code, r.json()["name"]) for key, r in responses.items()} == {
        "held": (201, "same-1"), "other": (201, "same-2")}
    assert WorkflowNameCounter.objects.get(spec_name="same").value == 2


@pytest.mark.django_db(transaction=True)
def test_racing_submissions_get_each_number_once_and_refused_ones_none(team, user):
    statuses: list[int] = []

    def submitter(spec: str):
        def run():
            for _ in range(3):
                statuses.append(submit(user, "team", spec).status_code)
        return run

    threads = [_in_thread(submitter(gpu_spec(1, "race")), f"ok-{n}") for n in range(4)]
    threads += [_in_thread(submitter(gpu_spec(101, "race")), f"over-{n}") for n in range(2)]
    for thread in threads:
        thread.join(60)
    assert sorted(statuses) == [201] * 12 + [409] * 6
    names = sorted(Workflow.objects.values_list("name", flat=True),
                   key=lambda name: int(name.rsplit("-", 1)[1]))
    assert names == [f"race-{n}" for n in range(1, 13)]
    assert WorkflowNameCounter.objects.get(spec_name="race").value == 12
