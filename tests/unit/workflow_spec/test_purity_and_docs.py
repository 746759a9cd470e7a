"""The spec package stays Django-free, and EXTENSIONS.md's examples parse."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from workflows.spec import parse_workflow_spec

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "workflows" / "spec" / "EXTENSIONS.md").read_text()


def test_no_django_import() -> None:
    code = ("import sys, workflows.spec, scheduler.kai.podgroups, scheduler.kai.crd_validation, "
            "scheduler.core.podgroup_validation; "
            "print(any(m == 'django' or m.startswith('django.') for m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "False"


def _blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)


def test_full_example_parses() -> None:
    workflow = parse_workflow_spec(_blocks()[1])
    group = workflow.groups[0]
    assert group.gpus == 32
    assert group.podgroup_spec_fields() == {"minSubGroup": 3, "subGroups": [
        {"name": f"prefill-{i}", "minMember": 8} for i in range(4)]}


def test_group_snippets_parse() -> None:
    for snippet in _blocks()[2:]:
        if "…" in snippet:
            continue  # elided for brevity; the full shape is a seed test case
        loaded = yaml.safe_load(snippet)
        block = loaded[0] if isinstance(loaded, list) else loaded
        scheduling = block["scheduling"]
        tasks = block.get("tasks")
        if tasks is None:  # scheduling-only snippets: one task per leaf
            parents = {sg.get("parent") for sg in scheduling["subGroups"]}
            tasks = [{"name": sg["name"], "image": "x", "replicas": sg["minMember"]}
                     for sg in scheduling["subGroups"] if sg["name"] not in parents]
            tasks[0]["lead"] = True
        spec = {"workflow": {"name": "doc", "groups": [
            {"name": "g", "scheduling": scheduling, "tasks": tasks}]}}
        workflow = parse_workflow_spec(yaml.safe_dump(spec))
        assert workflow.groups[0].podgroup_spec_fields()
    sets = parse_workflow_spec(yaml.safe_dump({"workflow": {"name": "doc", "groups": [{
        "name": "g", "scheduling": yaml.safe_load(_blocks()[4])["scheduling"],
        "tasks": [{"name": n, "image": "x", "replicas": r, "lead": n == "decode-workers"}
                  for n, r in [("decode-workers", 4), ("decode-leaders", 1),
                               ("prefill-workers", 4), ("prefill-leaders", 1)]]}]}}))
    subgroups = sets.groups[0].podgroup_spec_fields()["subGroups"]
    assert subgroups[0] == {"name": "decode", "minSubGroup": 2,
                            "topologyConstraint": {"requiredTopologyLevel": "block"}}
    assert subgroups[1] == {"name": "decode-workers", "parent": "decode", "minMember": 4,
                            "topologyConstraint": {"requiredTopologyLevel": "rack"}}
