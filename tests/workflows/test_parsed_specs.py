"""A spec submitted again is not parsed again, unless what its parse depends on changed: the
`--set` variables, the pool's platforms, the input limits, or the stored Topology it names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.parses import counted_parses
from tests.workflows.conftest import gpu_spec, submit
from workflows import admission, parsed_specs
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

RACK_SPEC = gpu_spec(1, "racked").replace(
    "      memory: 1Gi\n", "      memory: 1Gi\n      topology: [{key: rack}]\n")


@pytest.fixture
def parses(monkeypatch) -> Iterator[list[str]]:
    """The texts admission parsed, its kept specs (and the pools read without a lock, which
    another test's pool of the same name may have left) emptied first."""
    monkeypatch.setattr(admission, "_unlocked", {})
    yield from counted_parses(monkeypatch, admission, parsed_specs.PARSED)


def test_the_same_text_is_parsed_once_and_admitted_each_time(team, user, parses) -> None:
    spec = gpu_spec(1, "sweep")
    names = [submit(user, "team", spec).json()["name"] for _ in range(3)]
    assert names == ["sweep-1", "sweep-2", "sweep-3"]
    assert parses == [spec]
    assert Workflow.objects.filter(name__startswith="sweep-").count() == 3
    assert submit(user, "team", gpu_spec(2, "sweep")).status_code == 201  # another text
    assert len(parses) == 2


def test_variables_platforms_and_limits_are_part_of_what_is_kept(team, parses, settings):
    spec = gpu_spec(1, "kept")
    first = admission.parse_for_pool(team, spec)
    assert admission.parse_for_pool(team, spec) is first
    assert admission.parse_for_pool(team, spec, set_variables=["x=1"]) is not first
    team.platforms = {**team.platforms, "gb200": {"description": "GB200"}}
    assert admission.parse_for_pool(team, spec) is not first
    settings.OSMO_INPUT_LIMITS = {"max_depth": 32}
    assert admission.parse_for_pool(team, spec) is not first
    assert len(parses) == 4


def test_a_spec_that_names_topology_levels_is_parsed_each_time(team, parses) -> None:
    first = admission.parse_for_pool(team, RACK_SPEC)
    assert first.resources["gpu"].topology[0].key == "rack"  # it did read the levels
    assert admission.parse_for_pool(team, RACK_SPEC) is not first
    assert parses == [RACK_SPEC, RACK_SPEC]


def test_a_refused_spec_is_refused_again(team, user, parses) -> None:
    bad = gpu_spec(1, "bad").replace("gpu: 1", "gpu: lots")
    for _ in range(2):
        response = submit(user, "team", bad)
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_spec"
    assert parses == [bad, bad]
    assert not Workflow.objects.filter(name__startswith="bad").exists()


@pytest.mark.parametrize("bound", ["entries", "characters"])
def test_the_kept_specs_are_bounded(team, parses, monkeypatch, bound) -> None:
    specs = [gpu_spec(1, f"many-{n}") for n in range(5)]
    monkeypatch.setattr(parsed_specs.PARSED, bound, 3 if bound == "entries" else
                        sum(len(spec) for spec in specs[:3]))
    for spec in specs:
        admission.parse_for_pool(team, spec)
    assert parsed_specs.PARSED.texts() == specs[2:]
    assert parsed_specs.PARSED.held() == sum(len(spec) for spec in specs[2:])
    admission.parse_for_pool(team, specs[0])  # the oldest went first
    admission.parse_for_pool(team, specs[4])
    assert parses == [*specs, specs[0]]


def test_a_long_text_is_parsed_each_time(team, parses, monkeypatch) -> None:
    monkeypatch.setattr(parsed_specs.PARSED, "longest", 100)
    spec = gpu_spec(1, "long")
    assert len(spec) > 100
    admission.parse_for_pool(team, spec)
    admission.parse_for_pool(team, spec)
    assert parses == [spec, spec] and not parsed_specs.PARSED.texts()
