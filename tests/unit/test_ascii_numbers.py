"""Only ASCII digits are numbers: Python's int(), Decimal() and `\\d` also read the full-width
'８' (and '1_000') as numbers, so a GPU count or a size written so would be taken at face
value."""

from __future__ import annotations

import pytest

from scheduler.podgrouper.model import WorkloadError
from scheduler.podgrouper.registry import int_field
from scheduler.podgrouper.workload import pod_gpus
from workflows.spec import SpecError, parse_workflow_spec
from workflows.spec.units import parse_bytes, parse_duration_seconds, parse_millicores

NOT_ASCII = ["\uff18", "\u0668", "1_000", "\uff11\uff10Gi"]


@pytest.mark.parametrize("text", NOT_ASCII)
def test_quantities_and_durations_in_other_digits_are_refused(text):
    for parse in (parse_bytes, parse_millicores, parse_duration_seconds):
        with pytest.raises(ValueError):
            parse(text)


def test_ascii_quantities_and_durations_still_parse():
    assert (parse_bytes("8Gi"), parse_millicores("500m"), parse_duration_seconds(" 90 "),
            parse_duration_seconds("1h30m")) == (8 * 2**30, 500, 90, 5400)


@pytest.mark.parametrize("text", NOT_ASCII)
def test_a_spec_gpu_count_in_other_digits_is_refused(text):
    spec = ("workflow:\n  name: w\n  tasks:\n  - {name: a, image: x, command: [x], resource: r}"
            f"\n  resources:\n    r: {{gpu: \"{text}\"}}\n")
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(spec)
    assert list(caught.value.errors) == ["workflow.resources.r.gpu"]
    assert parse_workflow_spec(spec.replace(text, " 8 ")).total_gpus == 8


@pytest.mark.parametrize("text", NOT_ASCII)
def test_workload_integers_in_other_digits_are_refused(text):
    with pytest.raises(WorkloadError):
        int_field(text, "spec.parallelism")
    pod = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": text}}}]}}
    with pytest.raises(WorkloadError):
        pod_gpus(pod)
    assert (int_field(" 8 ", "x"), int_field("-1", "x", minimum=-1)) == (8, -1)
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8"
    assert pod_gpus(pod) == 8
