"""Every label and annotation key (and the GPU resource name) is spelled out once, in
`scheduler/core/kai_names.py`; every other product module imports it from there."""

from __future__ import annotations

import ast
from pathlib import Path

from scheduler.core import kai_names

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("osmo", "pools", "workflows", "scheduler", "dashboard")
HOME = ROOT / "scheduler" / "core" / "kai_names.py"
KEYS = {value: name for name, value in vars(kai_names).items()
        if isinstance(value, str) and name.endswith(("_LABEL", "_ANNOTATION", "_RESOURCE"))}


def spelled_keys(source: str) -> list[tuple[int, str]]:
    """(line, key) for every string literal that is one of the keys."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in KEYS]


def test_the_keys_are_known():
    assert {"osmo/workflow-name", "osmo/task-name", "osmo.pool", "kai.scheduler/queue",
            "pod-group-name", "nvidia.com/gpu", "app.kubernetes.io/managed-by"} <= set(KEYS)


def test_no_module_spells_out_a_key_of_the_names_module():
    found = {str(path.relative_to(ROOT)): lines
             for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             if path != HOME and "migrations" not in path.parts
             and (lines := spelled_keys(path.read_text()))}
    assert found == {}


def test_the_finder_sees_a_spelled_out_key():
    assert spelled_keys('labels = {"osmo.pool": name}\nx = f"{POOL_LABEL}"\n'
                        'a = {"osmo/task-name": t, "other": 1}\n') == [
        (1, "osmo.pool"), (3, "osmo/task-name")]
