"""scheduler/core must stay pure: no Django, DRF, Celery, nor any third-party import."""

import ast
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[3] / "scheduler" / "core"
FORBIDDEN = ("django", "rest_framework", "celery")


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_core_has_modules():
    assert (CORE / "cycle.py").exists()


def test_no_framework_import_in_core():
    offenders = [
        f"{path.name}: {name}"
        for path in sorted(CORE.rglob("*.py"))
        for name in imported_modules(path)
        if name.split(".")[0] in FORBIDDEN
    ]
    assert offenders == []


def test_core_imports_only_stdlib_or_itself():
    offenders = [
        f"{path.name}: {name}"
        for path in sorted(CORE.rglob("*.py"))
        for name in imported_modules(path)
        if name.split(".")[0] not in sys.stdlib_module_names
        and not name.startswith("scheduler.core")
        and name != "__future__"
    ]
    assert offenders == []
