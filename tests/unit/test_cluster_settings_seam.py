"""One seam: only `scheduler/backends/` (and the settings module) reads the cluster settings;
everything else takes a `BackendSpec` (`scheduler/backends/spec.py`). A read is an attribute
of that name (`settings.OSMO_NAMESPACE`), or the name as a string handed to `getattr`,
`os.environ` / `os.getenv` — words in docstrings and comments are not reads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("osmo", "pools", "workflows", "scheduler", "dashboard")
HOME = ("scheduler/backends/",)
ALLOWED = {"osmo/settings.py"}
CLUSTER_SETTING = re.compile(
    r"^OSMO_(CLUSTER_BACKEND|NAMESPACE|PLACEMENT|KUBECONFIG|KAI_KUBECONFIG|SCHEDULER_NAME"
    r"|K8S_\w+)$")


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        base = func.value
        prefix = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        return f"{prefix}.{func.attr}"
    return ""


def cluster_setting_reads(source: str) -> list[tuple[int, str]]:
    """(line, setting) of every read of a cluster setting in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and CLUSTER_SETTING.match(node.attr):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and _called(node) in {
                "getattr", "os.getenv", "environ.get", "environ.setdefault", "environ.pop"}:
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and CLUSTER_SETTING.match(arg.value):
                    found.append((node.lineno, arg.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and CLUSTER_SETTING.match(node.slice.value):
            found.append((node.lineno, node.slice.value))
    return sorted(found)


def outside_files() -> list[str]:
    files = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "migrations" in path.parts or relative in ALLOWED or relative.startswith(HOME):
                continue
            files.append(relative)
    return files + ["manage.py"]


def test_no_module_outside_the_backends_reads_a_cluster_setting():
    found = {path: reads for path in outside_files()
             if (reads := cluster_setting_reads((ROOT / path).read_text()))}
    assert found == {}


def test_the_scan_covers_the_modules_that_read_them_before():
    files = set(outside_files())
    assert {"osmo/health.py", "osmo/standalone.py", "scheduler/services.py",
            "workflows/admission.py", "workflows/api/log_views.py",
            "scheduler/management/commands/run_k8s_backend.py"} <= files
    assert not any(path.startswith("scheduler/backends/") for path in files)


def test_a_planted_read_is_caught_and_words_are_not():
    planted = (
        '"""Reads OSMO_NAMESPACE: words only."""\n'
        "import os\n"
        "from django.conf import settings\n"
        "# settings.OSMO_PLACEMENT in a comment\n"
        "a = settings.OSMO_NAMESPACE\n"
        "b = getattr(settings, 'OSMO_CLUSTER_BACKEND', 'embedded')\n"
        "c = os.environ.get('OSMO_K8S_INTERVAL')\n"
        "d = os.environ['OSMO_SCHEDULER_NAME']\n"
        "e = settings.OSMO_KAI_KUBECONFIG\n"
        "f = settings.OSMO_SIM_TASK_SECONDS\n"  # not a cluster setting
        "g = os.getenv('OSMO_KUBECONFIG')\n")
    assert cluster_setting_reads(planted) == [
        (5, "OSMO_NAMESPACE"), (6, "OSMO_CLUSTER_BACKEND"), (7, "OSMO_K8S_INTERVAL"),
        (8, "OSMO_SCHEDULER_NAME"), (9, "OSMO_KAI_KUBECONFIG"), (11, "OSMO_KUBECONFIG")]
