"""The shape of the code base: module-level imports between the product's modules form no
cycle; a function-local import of a product module exists only for a reason named here
(never to dodge a cycle); and only the workflows app writes the workflows tables."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("osmo", "pools", "workflows", "scheduler", "dashboard")

# (module, imported module) pairs imported inside a function, and why.
LOCAL_IMPORTS_ALLOWED = {
    # Run after django.setup() in the standalone process, which must configure Django first.
    ("osmo.standalone", "osmo.accounts.services"),
    ("osmo.standalone", "osmo.demo"),
    # The spawned scheduler process imports the backend only after django.setup().
    ("scheduler.backends.kubernetes.scheduler_process", "scheduler.backends.kubernetes.runner"),
}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The product modules an import statement loads: ``from package import submodule``
    names the submodule, ``from module import name`` the module. A module's own parent
    packages are left out: Python always initialises them first, so they cannot close a cycle.
    """
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    elif isinstance(node, ast.ImportFrom):
        base = _resolve(module, path, node)
        names = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                 for alias in node.names}
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module and not module.startswith(f"{name}."):
            found.add(name)
    return found


def _imports(modules: dict[str, Path]) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    top: dict[str, set[str]] = {}
    local: set[tuple[str, str]] = set()
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        top[module] = set()
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                top[module] |= _targets(module, path, node, modules)
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        local |= {(module, target)
                                  for target in _targets(module, path, node, modules)}
    return top, local


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_module_level_imports_form_no_cycle():
    top, _ = _imports(_modules())
    cycle = _cycle(top)
    assert cycle is None, " → ".join(cycle)


def test_function_local_imports_of_product_modules_are_the_named_ones():
    _, local = _imports(_modules())
    assert local - LOCAL_IMPORTS_ALLOWED == set()


def test_the_checker_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


WORKFLOW_MODELS = {"Workflow", "WorkflowGroup", "Task", "WorkflowNameCounter"}
WRITE_METHODS = {"update", "delete", "create", "bulk_create", "bulk_update", "get_or_create",
                 "update_or_create"}
WRITE_SQL = re.compile(r"\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+workflows_", re.IGNORECASE)


def _queryset_root(node: ast.AST) -> str | None:
    """`Task.objects.filter(...).update(...)` → "Task" (the model a queryset chain starts at)."""
    while isinstance(node, ast.Call | ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute) and node.attr == "objects" and isinstance(
                node.value, ast.Name):
            return node.value.id
        node = node.func if isinstance(node, ast.Call) else node.value
    return None


def _workflow_table_writes(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in WRITE_METHODS \
                and _queryset_root(node.func.value) in WORKFLOW_MODELS:
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and WRITE_SQL.search(node.value):
            lines.append(node.lineno)
    return lines


def test_only_the_workflows_app_writes_workflows_tables():
    writes = {module: lines for module, path in _modules().items()
              if not module.startswith("workflows")
              and (lines := _workflow_table_writes(ast.parse(path.read_text())))}
    assert writes == {}


def test_the_write_finder_sees_orm_and_sql_writes():
    found = _workflow_table_writes(ast.parse(
        "Task.objects.filter(pk=1).exclude(x=2).update(status='X')\n"
        "Workflow.objects.create(name='w')\n"
        "cursor.execute('UPDATE workflows_task SET x = 1')\n"
        "Task.objects.filter(pk=1).values_list('id')\n"
        "Node.objects.filter(pk=1).update(x=1)\n"))
    assert found == [1, 2, 3]
