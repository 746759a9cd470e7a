"""Dispatch parses a stored spec once per text: a workflow submitted again from the same file
reuses the parse; another text, or one too large to keep, is parsed for itself."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduler.kai import workflow_manifests
from tests.parses import counted_parses

SPEC = """
workflow:
  name: {name}
  tasks:
  - {{name: main, image: ubuntu, command: [train], resource: gpu}}
  resources:
    gpu: {{gpu: 1, cpu: 4, memory: 16Gi}}
"""


@pytest.fixture
def parses(monkeypatch):
    yield from counted_parses(monkeypatch, workflow_manifests, workflow_manifests.PARSED)


def test_one_text_is_parsed_once_and_each_other_text_for_itself(parses) -> None:
    rendered = [SimpleNamespace(rendered_spec=SPEC.format(name="a"), spec="ignored")
                for _ in range(3)]
    plain = SimpleNamespace(rendered_spec="", spec=SPEC.format(name="b"))
    specs = [workflow_manifests.stored_spec(w) for w in (*rendered, plain, plain)]
    assert [s.name for s in specs] == ["a", "a", "a", "b", "b"]
    assert specs[0] is specs[1] is specs[2] and specs[3] is specs[4]
    assert len(parses) == 2
    assert parses[0] == {"workflow": {"name": "a", "tasks": [
        {"name": "main", "image": "ubuntu", "command": ["train"], "resource": "gpu"}],
        "resources": {"gpu": {"gpu": 1, "cpu": 4, "memory": "16Gi"}}}}  # rendered: data
    assert parses[1] == SPEC.format(name="b")  # never rendered: the text, bounded again


def test_a_text_over_the_limit_is_parsed_every_time(parses, monkeypatch) -> None:
    monkeypatch.setattr(workflow_manifests.PARSED, "longest", 10)
    workflow = SimpleNamespace(rendered_spec=SPEC.format(name="big"), spec="")
    first, second = (workflow_manifests.stored_spec(workflow) for _ in range(2))
    assert first == second and first is not second
    assert len(parses) == 2
