"""Golden tests: every seed PodGroup example (000, 001, 003) from an OSMO spec.

For each case: the OSMO workflow YAML (``osmo_spec_yaml``: the seed's gang fields under the
group's ``scheduling:`` block, one task per leaf) parses — or is rejected with the validator's
findings mapped to spec paths —, the built PodGroup's gang fields equal the seed's byte for byte
(seed 001's plural topologyConstraints compared in their normalized singular form), the
validator gives the decided verdict, and the CRD schema accepts what we build.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.core.podgroup_validation import normalize_topology_constraints, validate_podgroup
from scheduler.kai.crd_validation import validate_manifest
from scheduler.kai.podgroups import build_group_manifests
from tests.shared_data import kai_crds
from tests.unit.kai_podgroups.seed_cases import ALL_CASES, GANG_KEYS, SeedCase, osmo_spec_yaml
from workflows.spec import SpecError, parse_workflow_spec

REPO = Path(__file__).resolve().parents[3]
GROUP_PATH = "workflow.groups[0].scheduling"


def _seed_manifest(case: SeedCase) -> dict:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "seed-example"}, "spec": case.spec}


def _build(case: SeedCase, validate: bool):
    workflow = parse_workflow_spec(osmo_spec_yaml(case), validate_scheduling=validate)
    return build_group_manifests(workflow.groups[0], workflow_name="seed-example-1",
                                 namespace="osmo", queue="osmo-pool-osmo-team.shared",
                                 priority="NORMAL")


def _dump(value: object) -> str:
    return yaml.safe_dump(value, sort_keys=False)


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_osmo_spec_verdict(case: SeedCase) -> None:
    text = osmo_spec_yaml(case)
    if case.valid:
        workflow = parse_workflow_spec(text)
        assert workflow.groups[0].name == "gang"
        return
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(text)
    expected: dict[str, list[str]] = {}
    for path, message in case.errors:
        expected.setdefault(GROUP_PATH + path[len("spec"):], []).append(message)
    assert caught.value.errors == expected


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_built_gang_fields_equal_seed_byte_for_byte(case: SeedCase) -> None:
    seed_gang = {key: case.spec[key] for key in GANG_KEYS if key in case.spec}
    expected, issues = normalize_topology_constraints(seed_gang)
    if "topologyConstraints" not in seed_gang:
        assert expected == seed_gang  # nothing to normalize: compared verbatim
    podgroup = _build(case, validate=case.valid).podgroup
    spec = podgroup["spec"]
    built_gang = {key: spec[key] for key in expected if key in spec}
    assert _dump(built_gang) == _dump(expected)
    assert {key for key in GANG_KEYS if key in spec} == set(expected)
    assert spec["queue"] == "osmo-pool-osmo-team.shared"
    assert spec["priorityClassName"] == "osmo-normal"
    assert spec["preemptibility"] == "non-preemptible"


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_validator_verdict_on_seed_and_built(case: SeedCase) -> None:
    result = validate_podgroup(_seed_manifest(case))
    assert [(i.path, i.message) for i in result.errors] == case.errors
    assert [(i.path, i.message) for i in result.warnings] == case.warnings
    assert result.allowed is case.valid

    manifests = _build(case, validate=case.valid)
    built = validate_podgroup(manifests.podgroup)
    assert [(i.path, i.message) for i in built.errors] == case.errors
    assert [(i.path, i.message) for i in built.warnings] == case.warnings
    with_pods = validate_podgroup(manifests.podgroup, manifests.pods)
    assert [(i.path, i.message) for i in with_pods.errors] == case.errors


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_crd_schema(case: SeedCase) -> None:
    manifests = _build(case, validate=case.valid)
    assert validate_manifest(manifests.podgroup, crds_dir=kai_crds()) == []
    assert validate_manifest(_seed_manifest(case), crds_dir=kai_crds()) == case.raw_crd_errors


def test_inconsistent_minmember_also_unreachable_with_its_pods() -> None:
    case = next(c for c in ALL_CASES if c.id == "003-validation-inconsistent")
    manifests = _build(case, validate=False)
    result = validate_podgroup(manifests.podgroup, manifests.pods)
    assert [(i.path, i.message) for i in result.warnings] == [
        ("spec.minMember", "minMember (30) cannot be reached: the PodGroup has only 24 pods"),
        *case.warnings,
    ]


HANDWRITTEN_000_TWO_LEVEL = """\
workflow:
  name: training-job
  resources:
    default: {gpu: 1, cpu: 4, memory: 16Gi}
  groups:
  - name: gang
    scheduling:
      minSubGroup: 2            # need both decode and prefill
      subGroups:
      - {name: decode, minSubGroup: 2}
      - {name: decode-leaders, parent: decode, minMember: 1}
      - {name: decode-workers, parent: decode, minMember: 4}
      - {name: prefill, minSubGroup: 2}
      - {name: prefill-leaders, parent: prefill, minMember: 1}
      - {name: prefill-workers, parent: prefill, minMember: 4}
    tasks:
    - {name: decode-leader, image: vllm, lead: true, subGroup: decode-leaders}
    - {name: decode-worker, image: vllm, replicas: 4, subGroup: decode-workers}
    - {name: prefill-leader, image: vllm, subGroup: prefill-leaders}
    - {name: prefill-worker, image: vllm, replicas: 4, subGroup: prefill-workers}
"""

HANDWRITTEN_001_EXAMPLE1 = """\
workflow:
  name: disagg
  groups:
  - name: gang
    scheduling:
      minMember: 2
      subGroups:
      - {name: decode, minMember: 4}
      - {name: prefill, minMember: 1}
      topologyConstraints:          # seed 001's plural form, normalized at parse time
        subGroups:
          decode: {requiredTopologyLevel: rack}
          prefill: {requiredTopologyLevel: rack}
    tasks:
    - {name: decode, image: vllm, replicas: 4, lead: true}   # subGroup defaults to 'decode'
    - {name: prefill, image: vllm}
"""


def test_handwritten_two_level_spec_builds_seed_000_example() -> None:
    workflow = parse_workflow_spec(HANDWRITTEN_000_TWO_LEVEL)
    group = workflow.groups[0]
    assert group.gpus == 10
    assert [task.subgroup for task in group.tasks] == [
        "decode-leaders", "decode-workers", "prefill-leaders", "prefill-workers"]
    manifests = build_group_manifests(group, workflow_name="training-job-1", namespace="osmo",
                                      queue="q", priority="HIGH")
    case = next(c for c in ALL_CASES if c.id == "000-two-level-minSubGroup")
    spec = manifests.podgroup["spec"]
    assert _dump({k: spec[k] for k in case.spec}) == _dump(case.spec)
    assert [pod["metadata"]["labels"]["kai.scheduler/subgroup-name"]
            for pod in manifests.pods] == ["decode-leaders"] + ["decode-workers"] * 4 + [
        "prefill-leaders"] + ["prefill-workers"] * 4
    assert validate_podgroup(manifests.podgroup, manifests.pods).as_dict() == {
        "allowed": True, "errors": [], "warnings": []}


def test_handwritten_plural_topology_builds_seed_001_example1() -> None:
    workflow = parse_workflow_spec(HANDWRITTEN_001_EXAMPLE1)
    spec = build_group_manifests(workflow.groups[0], workflow_name="disagg-1", namespace="osmo",
                                 queue="q").podgroup["spec"]
    assert spec["minMember"] == 2
    assert spec["subGroups"] == [
        {"name": "decode", "minMember": 4, "topologyConstraint": {"requiredTopologyLevel": "rack"}},
        {"name": "prefill", "minMember": 1,
         "topologyConstraint": {"requiredTopologyLevel": "rack"}},
    ]
    assert "topologyConstraints" not in spec
