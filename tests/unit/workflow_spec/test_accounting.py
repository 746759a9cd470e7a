"""GPU accounting (per task × replicas, per group, per workflow) and unit normalization."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.spec import parse_workflow_spec
from workflows.spec.units import (
    format_bytes,
    format_cpu,
    parse_bytes,
    parse_duration_seconds,
    parse_millicores,
)


def test_replicas_multiply_gpus() -> None:
    spec = {"workflow": {"name": "w",
                         "resources": {"default": {"gpu": 8}, "small": {"gpu": 1}},
                         "groups": [
                             {"name": "big", "tasks": [
                                 {"name": "m", "image": "x", "lead": True},
                                 {"name": "w", "image": "x", "replicas": 3}]},
                             {"name": "tiny", "tasks": [
                                 {"name": "t", "image": "x", "resource": "small",
                                  "replicas": 2}]}]}}
    workflow = parse_workflow_spec(yaml.safe_dump(spec))
    assert [task.gpus for task in workflow.tasks] == [8, 24, 2]
    assert [task.resource.gpus for task in workflow.tasks] == [8, 8, 1]
    assert [(group.gpus, group.pod_count) for group in workflow.groups] == [(32, 4), (2, 2)]
    assert (workflow.total_gpus, workflow.max_group_gpus) == (34, 32)
    assert workflow.group("tiny").task("t").replicas == 2
    with pytest.raises(KeyError):
        workflow.group("nope")
    with pytest.raises(KeyError):
        workflow.groups[0].task("nope")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 16), st.integers(1, 8)), min_size=1,
                         max_size=4), min_size=1, max_size=5))
def test_gpu_sums_property(groups) -> None:
    resources = {f"r{g}-{t}": {"gpu": gpus} for g, tasks in enumerate(groups)
                 for t, (gpus, _) in enumerate(tasks)}
    spec = {"workflow": {"name": "w", "resources": resources, "groups": [
        {"name": f"g{g}", "tasks": [
            {"name": f"t{g}-{t}", "image": "x", "resource": f"r{g}-{t}", "replicas": replicas,
             "lead": t == 0}
            for t, (_, replicas) in enumerate(tasks)]}
        for g, tasks in enumerate(groups)]}}
    workflow = parse_workflow_spec(yaml.safe_dump(spec))
    expected = [sum(gpus * replicas for gpus, replicas in tasks) for tasks in groups]
    assert [group.gpus for group in workflow.groups] == expected
    assert workflow.total_gpus == sum(expected)
    assert workflow.max_group_gpus == max(expected) <= workflow.total_gpus


@pytest.mark.parametrize(("value", "expected"), [
    ("1Gi", 2**30), ("512Mi", 2**29), ("1.5Ki", 1536), ("1G", 10**9), ("2k", 2000),
    (1024, 1024), ("1e3", 1000), ("1500m", 2), ("0", 0), ("3Ei", 3 * 2**60),
])
def test_parse_bytes(value, expected) -> None:
    assert parse_bytes(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (1, 1000), (0.5, 500), ("250m", 250), ("2", 2000), ("0.0001", 1), (16, 16000),
])
def test_parse_millicores(value, expected) -> None:
    assert parse_millicores(value) == expected


@pytest.mark.parametrize("value", [True, None, [1], "4GB", "abc", "-1Gi"])
def test_bad_quantities(value) -> None:
    with pytest.raises(ValueError):
        parse_bytes(value)


@pytest.mark.parametrize(("value", "expected"), [
    ("10m", 600), ("1h30m", 5400), ("2d", 172800), ("45s", 45), (90, 90), ("120", 120),
    # OSMO's other forms: seconds as a float (rounded up), ms/us, ISO 8601
    (1.5, 2), ("500ms", 1), ("PT10S", 10), ("P1DT2H", 93600), ("PT1M30.5S", 91),
])
def test_durations(value, expected) -> None:
    assert parse_duration_seconds(value) == expected


@pytest.mark.parametrize("value", ["10 m", "m10", "", -1, True, -0.5, "1h1x", "P", "PT",
                                   "P1H"])
def test_bad_durations(value) -> None:
    with pytest.raises(ValueError):
        parse_duration_seconds(value)


def test_formatting() -> None:
    assert (format_cpu(16000), format_cpu(250)) == ("16", "250m")
    assert (format_bytes(30 * 2**30), format_bytes(1536 * 2**20), format_bytes(1000),
            format_bytes(0)) == ("30Gi", "1536Mi", "1000", "0")
    assert parse_millicores(-0.0) == 0
    with pytest.raises(ValueError):
        parse_millicores("-1")
