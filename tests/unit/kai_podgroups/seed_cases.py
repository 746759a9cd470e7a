"""Every PodGroup example of seeds 000, 001 and 003, with the decided verdict.

``spec`` is the seed's ``spec:`` block verbatim, except where the seed elides parts with
``[...]`` / ``# ... similar`` comments: those are filled in the way the seed describes, and
``note`` says so. ``errors``/``warnings`` are the exact validator findings under the decided
rules (seed 000 = Option 2 with mutual exclusivity wins over 003; SCHEDULING.md rules).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml


@dataclass(frozen=True)
class SeedCase:
    id: str
    spec_yaml: str
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    seed_verdict: str = "valid"
    note: str = ""
    raw_crd_errors: list[str] = field(default_factory=list)

    @property
    def spec(self) -> dict:
        return yaml.safe_load(self.spec_yaml)

    @property
    def valid(self) -> bool:
        return not self.errors


def _leaves(prefix: str, count: int, member: int | None, parent: str | None = None) -> str:
    lines = []
    for index in range(count):
        lines.append(f"    - name: {prefix}-{index}")
        if parent:
            lines.append(f"      parent: {parent}")
        if member is not None:
            lines.append(f"      minMember: {member}")
    return "\n".join(lines) + "\n"


MUTEX_ROOT = "minMember ({m}) and minSubGroup ({s}) are mutually exclusive on the PodGroup; " \
             "keep minSubGroup and drop minMember"
MUTEX_SG = "minMember ({m}) and minSubGroup ({s}) are mutually exclusive on subgroup '{n}'; " \
           "keep minSubGroup and drop minMember"
MID_MEMBER = "minMember ({m}) is set on mid-level subgroup '{n}', which has {c} child " \
             "subgroups; use minSubGroup (1..{c}) instead"
LEAF_NO_MEMBER = "leaf subgroup '{n}' needs minMember > 0 (got nothing)"
EXCEEDS = "minSubGroup ({s}) exceeds the number of direct child subgroups ({c}) of {w}"


def _mutex_root(m: int, s: int) -> tuple[str, str]:
    return ("spec.minMember", MUTEX_ROOT.format(m=m, s=s))


def _mutex_sg(index: int, name: str, m: int, s: int) -> tuple[str, str]:
    return (f"spec.subGroups[{index}].minMember", MUTEX_SG.format(m=m, s=s, n=name))


def _mid_member(index: int, name: str, m: int, c: int) -> tuple[str, str]:
    return (f"spec.subGroups[{index}].minMember", MID_MEMBER.format(m=m, n=name, c=c))


PREFILL_4X8 = _leaves("prefill", 4, 8)

SEED_000 = [
    SeedCase(
        id="000-single-level-minSubGroup",
        spec_yaml="minSubGroup: 3\nsubGroups:\n" + PREFILL_4X8.replace("    - ", "  - ")
        .replace("      ", "    "),
        note="Also seed 000's 'Valid: Leaf SubGroups use minMember' (identical spec).",
    ),
    SeedCase(
        id="000-two-level-minSubGroup",
        spec_yaml="""\
minSubGroup: 2
subGroups:
  - name: decode
    minSubGroup: 2
  - name: decode-leaders
    parent: decode
    minMember: 1
  - name: decode-workers
    parent: decode
    minMember: 4

  - name: prefill
    minSubGroup: 2
  - name: prefill-leaders
    parent: prefill
    minMember: 1
  - name: prefill-workers
    parent: prefill
    minMember: 4
""",
    ),
    SeedCase(
        id="000-valid-mid-level-as-printed",
        spec_yaml="""\
minSubGroup: 2
subGroups:
  - name: decode
    minSubGroup: 2
  - name: decode-leaders
    parent: decode
    minMember: 1
  - name: decode-workers
    parent: decode
    minMember: 4
""",
        errors=[("spec.minSubGroup", EXCEEDS.format(s=2, c=1, w="the PodGroup"))],
        note="Seed 000's 'Valid: Mid-level SubGroups use minSubGroup' prints only decode although "
             "its comment says 'Need both decode + prefill': as printed, the root's minSubGroup 2 "
             "exceeds its 1 child. With prefill added it is 000-two-level-minSubGroup (valid).",
    ),
    SeedCase(
        id="000-invalid-both-fields",
        spec_yaml="minMember: 24\nminSubGroup: 3\nsubGroups:\n"
        + PREFILL_4X8.replace("    - ", "  - ").replace("      ", "    "),
        errors=[_mutex_root(24, 3)],
        seed_verdict="invalid",
        note="The seed's 'subGroups: [...]' is filled with the four prefill leaves above it.",
    ),
    SeedCase(
        id="000-invalid-minSubGroup-on-leaf",
        spec_yaml="""\
minSubGroup: 3
subGroups:
  - name: prefill-0
    minSubGroup: 2
  - name: prefill-1
    minMember: 8
  - name: prefill-2
    minMember: 8
  - name: prefill-3
    minMember: 8
""",
        errors=[
            ("spec.subGroups[0].minSubGroup",
             "minSubGroup (2) is set on leaf subgroup 'prefill-0'; it counts direct child "
             "subgroups and there are none"),
            ("spec.subGroups[0].minMember", LEAF_NO_MEMBER.format(n="prefill-0")),
        ],
        seed_verdict="invalid",
        note="prefill-1..3 added (the seed shows only the offending leaf); the leaf also lacks "
             "minMember, which is a second error under the rules.",
    ),
    SeedCase(
        id="000-invalid-minSubGroup-exceeds-children",
        spec_yaml="""\
minSubGroup: 5
subGroups:
  - name: prefill-0
  - name: prefill-1
  - name: prefill-2
  - name: prefill-3
""",
        errors=[("spec.minSubGroup", EXCEEDS.format(s=5, c=4, w="the PodGroup"))]
        + [(f"spec.subGroups[{i}].minMember", LEAF_NO_MEMBER.format(n=f"prefill-{i}"))
           for i in range(4)],
        seed_verdict="invalid",
        note="As printed the leaves carry no minMember: four more errors besides the seed's.",
    ),
    SeedCase(
        id="000-appendix-option1-single-level",
        spec_yaml="minMember: 3\nsubGroups:\n"
        + PREFILL_4X8.replace("    - ", "  - ").replace("      ", "    "),
        seed_verdict="rejected design (Option 1)",
        note="Decided rules read root minMember as 3 *pods*; minSubGroup unset → all 4 leaves "
             "required. Valid, but it does not mean '3 replicas' — write minSubGroup: 3.",
    ),
    SeedCase(
        id="000-appendix-option1-heterogeneous",
        spec_yaml="""\
minMember: 2
subGroups:
  - name: decode
    minMember: 2
  - name: decode-leaders
    parent: decode
    minMember: 1
  - name: decode-workers
    parent: decode
    minMember: 4
  - name: prefill
    minMember: 2
  - name: prefill-leaders
    parent: prefill
    minMember: 1
  - name: prefill-workers
    parent: prefill
    minMember: 4
""",
        errors=[_mid_member(0, "decode", 2, 2), _mid_member(3, "prefill", 2, 2)],
        seed_verdict="rejected design (Option 1)",
    ),
]

SEED_001 = [
    SeedCase(
        id="001-example1-two-subgroups",
        spec_yaml="""\
minMember: 2 # (decode) + (prefill), ensuring the gang scheduling invariant
subGroups:
- name: decode
  minMember: 4

- name: prefill
  minMember: 1

topologyConstraints:
  subGroups:
    decode:
      requiredTopologyLevel: rack
    prefill:
      requiredTopologyLevel: rack
""",
        note="Root minMember 2 now counts pods (≤ the 5 required); both leaves are required.",
        raw_crd_errors=['spec.topologyConstraints: unknown field "topologyConstraints" '
                        "(the API server would drop it)"],
    ),
    SeedCase(
        id="001-example2-leaders-workers",
        spec_yaml="""\
minMember: 2  # To ensure gang scheduling, both decode and prefill SubGroups need to be scheduled
subGroups:
  - name: decode
    minMember: 2

  - name: decode-workers
    parent: decode
    minMember: 4

  - name: decode-leaders
    parent: decode
    minMember: 1


  - name: prefill
    minMember: 2

  - name: prefill-workers
    parent: prefill
    minMember: 4

  - name: prefill-leaders
    parent: prefill
    minMember: 1

topologyConstraints:
  subGroups:
    decode-workers:
      requiredTopologyLevel: rack
    decode-leaders:
      requiredTopologyLevel: rack
    prefill-workers:
      requiredTopologyLevel: rack
    prefill-leaders:
      requiredTopologyLevel: rack

  subGroupSets:
    - subGroups:
        - decode-workers
        - decode-leaders
      constraint:
        requiredTopologyLevel: block
    - subGroups:
        - prefill-workers
        - prefill-leaders
      constraint:
        requiredTopologyLevel: block
""",
        errors=[_mid_member(0, "decode", 2, 2), _mid_member(3, "prefill", 2, 2)],
        seed_verdict="valid (001 predates minSubGroup)",
        note="Mid-level minMember counted child subgroups in 001; the decided rules forbid "
             "minMember on mid-levels (use minSubGroup: 2). The subGroupSets land on decode "
             "and prefill, whose children are exactly the sets.",
        raw_crd_errors=['spec.topologyConstraints: unknown field "topologyConstraints" '
                        "(the API server would drop it)"],
    ),
    SeedCase(
        id="001-example3-replica-threshold",
        spec_yaml="""\
minMember: 2 # Minimum number of replicas required to satisfy gang scheduling constraints
subGroups:
  - name: replica-1
    minMember: 3

  - name: replica-2
    minMember: 3

  - name: replica-3
    minMember: 3
""",
        seed_verdict="valid (001 meant '2 of 3 replicas')",
        note="Valid, but the decided rules read minMember 2 as 2 pods with all 3 replicas "
             "required; 001's intent is minSubGroup: 2.",
    ),
    SeedCase(
        id="001-example4-autoscaling-sets",
        spec_yaml="""\
minMember: 1 # One replica required to satisfy scheduling constraints
subGroups:
  - name: replica-1
    minMember: 2

  - name: leaders-1
    parent: replica-1
    minMember: 1

  - name: workers-1
    parent: replica-1
    minMember: 3


  - name: replica-2
    minMember: 2

  - name: leaders-2
    parent: replica-2
    minMember: 1

  - name: workers-2
    parent: replica-2
    minMember: 3
""",
        errors=[_mid_member(0, "replica-1", 2, 2), _mid_member(3, "replica-2", 2, 2)],
        seed_verdict="valid (001 predates minSubGroup)",
        note="Decided form: minSubGroup: 1 at the root, minSubGroup: 2 on each replica.",
    ),
]


def _lws_groups() -> str:
    out = []
    for index in range(4):
        out.append(f"""\
  - name: group-{index}
    minMember: 6    # 1 leader + 5 workers
    minSubGroup: 2  # Need both leader and workers SubGroups
  - name: group-{index}-leader
    parent: group-{index}
    minMember: 1
  - name: group-{index}-workers
    parent: group-{index}
    minMember: 5
""")
    return "".join(out)


SEED_003 = [
    SeedCase(
        id="003-option2-inference-service",
        spec_yaml="minMember: 24      # Total pods needed (3 replicas × 8 pods)\n"
        "minSubGroup: 3     # Need 3 out of 4 replicas\nsubGroups:\n"
        + PREFILL_4X8.replace("    - ", "  - ").replace("      ", "    "),
        errors=[_mutex_root(24, 3)],
        seed_verdict="valid (003 Option 2)",
    ),
    SeedCase(
        id="003-option2-lws",
        spec_yaml="minMember: 18     # Total pods (3 groups × 6 pods)\n"
        "minSubGroup: 3    # 3 out of 4 groups\nsubGroups:\n" + _lws_groups(),
        errors=[_mutex_root(18, 3)] + [_mutex_sg(3 * i, f"group-{i}", 6, 2) for i in range(4)],
        seed_verdict="valid (003 Option 2)",
        note="'# ... groups 1, 2, 3 similar' filled in like group-0.",
    ),
    SeedCase(
        id="003-option2-grove",
        spec_yaml="""\
minMember: 28     # 3×8 + 1×4 = 28 pods
minSubGroup: 2    # Need prefill + decode
subGroups:
  - name: prefill
    minMember: 24   # 3 replicas × 8 pods
    minSubGroup: 3  # 3 out of 4 replicas
""" + _leaves("prefill", 4, 8, parent="prefill").replace("    - ", "  - ")
        .replace("      ", "    ") + """\

  - name: decode
    minMember: 4    # 1 replica × 4 pods
    minSubGroup: 1  # 1 out of 2 replicas
  - name: decode-0
    parent: decode
    minMember: 4
  - name: decode-1
    parent: decode
    minMember: 4
""",
        errors=[_mutex_root(28, 2), _mutex_sg(0, "prefill", 24, 3),
                _mutex_sg(5, "decode", 4, 1)],
        seed_verdict="valid (003 Option 2)",
        note="'# ... prefill-1, 2, 3' filled in like prefill-0.",
    ),
    SeedCase(
        id="003-option2-disaggregated-generic",
        spec_yaml="""\
minMember: 10     # 2×3 + 1×4
minSubGroup: 2    # prefill + decode
subGroups:
  - name: prefill
    minMember: 6
    minSubGroup: 2
  - name: prefill-0
    parent: prefill
    minMember: 3
  - name: prefill-1
    parent: prefill
    minMember: 3

  - name: decode
    minMember: 4
    minSubGroup: 1
  - name: decode-0
    parent: decode
    minMember: 4
""",
        errors=[_mutex_root(10, 2), _mutex_sg(0, "prefill", 6, 2), _mutex_sg(3, "decode", 4, 1)],
        seed_verdict="valid (003 Option 2)",
    ),
    SeedCase(
        id="003-option2-leader-workers",
        spec_yaml="""\
minMember: 9      # 1 leader + 2×4 workers
minSubGroup: 3    # leader + 2 worker groups
subGroups:
  - name: leader
    minMember: 1
  - name: workers-0
    minMember: 4
  - name: workers-1
    minMember: 4
  - name: workers-2
    minMember: 4
""",
        errors=[_mutex_root(9, 3)],
        seed_verdict="valid (003 Option 2)",
    ),
    SeedCase(
        id="003-validation-consistent",
        spec_yaml="""\
minMember: 10
minSubGroup: 3
subGroups:
  - name: replica-0
    minMember: 8
  - name: replica-1
    minMember: 8
  - name: replica-2
    minMember: 8
""",
        errors=[_mutex_root(10, 3)],
        seed_verdict="valid (003: 3 × 8 = 24 ≥ 10)",
    ),
    SeedCase(
        id="003-validation-inconsistent",
        spec_yaml="""\
minMember: 30
minSubGroup: 3
subGroups:
  - name: replica-0
    minMember: 8
  - name: replica-1
    minMember: 8
  - name: replica-2
    minMember: 8
""",
        errors=[_mutex_root(30, 3)],
        warnings=[("spec.minMember",
                   "minMember (30) is inconsistent with minSubGroup (3): the required child "
                   "subgroups need only 24 pods at their minimum")],
        seed_verdict="warning (003: 3 × 8 = 24 < 30)",
        note="Seed 003's warning is kept beside seed 000's mutual-exclusivity error.",
    ),
    SeedCase(
        id="003-appendix-dynamo",
        spec_yaml="""\
queue: inference
priorityClassName: inference-high
preemptibility: semi-preemptible

minMember: 28      # 3 prefill replicas (8 pods each) + 1 decode replica (4 pods)
minSubGroup: 2     # Need prefill + decode component types

subGroups:
  # === Prefill Component ===
  - name: prefill
    minMember: 24    # 3 replicas × 8 pods
    minSubGroup: 3   # 3 out of 4 replicas required
    topologyConstraint:
      requiredTopologyLevel: zone

  - name: prefill-0
    parent: prefill
    minMember: 8
    topologyConstraint:
      requiredTopologyLevel: rack

  - name: prefill-1
    parent: prefill
    minMember: 8
    topologyConstraint:
      requiredTopologyLevel: rack

  - name: prefill-2
    parent: prefill
    minMember: 8
    topologyConstraint:
      requiredTopologyLevel: rack

  - name: prefill-3  # OPTIONAL (elastic)
    parent: prefill
    minMember: 8
    topologyConstraint:
      requiredTopologyLevel: rack

  # === Decode Component ===
  - name: decode
    minMember: 4     # 1 replica × 4 pods
    minSubGroup: 1   # 1 out of 2 replicas required
    topologyConstraint:
      requiredTopologyLevel: zone

  - name: decode-0
    parent: decode
    minMember: 4
    topologyConstraint:
      requiredTopologyLevel: rack

  - name: decode-1  # OPTIONAL (elastic)
    parent: decode
    minMember: 4
    topologyConstraint:
      requiredTopologyLevel: rack
""",
        errors=[_mutex_root(28, 2), _mutex_sg(0, "prefill", 24, 3),
                _mutex_sg(5, "decode", 4, 1)],
        seed_verdict="valid (003 appendix, Option 2)",
        note="queue / priorityClassName / preemptibility come from the pool and the OSMO "
             "priority, not the spec; semi-preemptible is not in the v0.17 CRD enum.",
        raw_crd_errors=["spec.preemptibility: 'semi-preemptible' is not one of "
                        "['preemptible', 'non-preemptible']"],
    ),
    SeedCase(
        id="003-option1-inference-service",
        spec_yaml="minMember: 3  # Need 3 out of 4 replicas (SubGroups)\nsubGroups:\n"
        + PREFILL_4X8.replace("    - ", "  - ").replace("      ", "    "),
        seed_verdict="Option 1 (not chosen)",
        note="Valid under the decided rules, but minMember 3 means 3 pods, all 4 leaves required.",
    ),
    SeedCase(
        id="003-option1-lws",
        spec_yaml="""\
minMember: 3  # 3 out of 4 groups
subGroups:
  - name: group-0
    minMember: 2  # Leader + workers SubGroups needed
  - name: group-0-leader
    parent: group-0
    minMember: 1  # 1 leader pod
  - name: group-0-workers
    parent: group-0
    minMember: 5  # 5 worker pods

  - name: group-1
    minMember: 2
  - name: group-1-leader
    parent: group-1
    minMember: 1
  - name: group-1-workers
    parent: group-1
    minMember: 5
""",
        errors=[_mid_member(0, "group-0", 2, 2), _mid_member(3, "group-1", 2, 2)],
        seed_verdict="Option 1 (not chosen)",
        note="Groups 2 and 3 ('# ... similar') are left out; they would add the same error.",
    ),
    SeedCase(
        id="003-option1-grove",
        spec_yaml="""\
minMember: 2  # Need 2 component types: prefill + decode
subGroups:
  - name: prefill
    minMember: 3  # 3 out of 4 replicas
""" + _leaves("prefill", 4, 8, parent="prefill").replace("    - ", "  - ")
        .replace("      ", "    ") + """\

  - name: decode
    minMember: 1  # 1 out of 2 replicas
  - name: decode-0
    parent: decode
    minMember: 4
  - name: decode-1
    parent: decode
    minMember: 4
""",
        errors=[_mid_member(0, "prefill", 3, 4), _mid_member(5, "decode", 1, 2)],
        seed_verdict="Option 1 (not chosen)",
    ),
    SeedCase(
        id="003-option1-disaggregated-generic",
        spec_yaml="""\
minMember: 2  # prefill + decode components
subGroups:
  - name: prefill
    minMember: 2  # Both replicas needed
  - name: prefill-0
    parent: prefill
    minMember: 3  # 3 pods
  - name: prefill-1
    parent: prefill
    minMember: 3

  - name: decode
    minMember: 1  # 1 replica
  - name: decode-0
    parent: decode
    minMember: 4
""",
        errors=[_mid_member(0, "prefill", 2, 2), _mid_member(3, "decode", 1, 1)],
        seed_verdict="Option 1 (not chosen)",
    ),
    SeedCase(
        id="003-option1-leader-workers",
        spec_yaml="""\
minMember: 3  # leader + 2 worker groups
subGroups:
  - name: leader
    minMember: 1  # 1 pod
  - name: workers-0
    minMember: 4  # 4 pods
  - name: workers-1
    minMember: 4
  - name: workers-2
    minMember: 4  # Optional
""",
        seed_verdict="Option 1 (not chosen)",
        note="Valid, but 3 means 3 pods and all four leaves are required.",
    ),
]

ALL_CASES = SEED_000 + SEED_001 + SEED_003
GANG_KEYS = ("minMember", "minSubGroup", "topologyConstraint", "topologyConstraints",
             "subGroups")


def osmo_spec_yaml(case: SeedCase) -> str:
    """The OSMO workflow a user writes for this PodGroup: the seed's gang fields under the
    group's ``scheduling:`` block, one task per leaf subgroup with ``replicas`` = its minMember
    (1 when the seed gives none)."""
    spec = case.spec
    scheduling = {key: spec[key] for key in GANG_KEYS if key in spec}
    subgroups = spec.get("subGroups") or []
    parents = {entry.get("parent") for entry in subgroups}
    tasks = []
    for entry in subgroups:
        if entry["name"] in parents:
            continue
        task = {"name": entry["name"], "image": "nvcr.io/nvidia/pytorch:24.03-py3",
                "replicas": max(entry.get("minMember") or 1, 1), "subGroup": entry["name"]}
        if not tasks:
            task["lead"] = True
        tasks.append(task)
    document = {"workflow": {
        "name": "seed-example",
        "resources": {"default": {"gpu": 1, "cpu": 4, "memory": "16Gi"}},
        "groups": [{"name": "gang", "scheduling": scheduling, "tasks": tasks}],
    }}
    return yaml.safe_dump(document, sort_keys=False)
