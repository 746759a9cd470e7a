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
    ("osmo.standalone", "scheduler.backends.embedded.demo"),
    ("osmo.standalone", "scheduler.backends.spec"),
    # A backend's spec is a value the spawned scheduler process builds before django.setup():
    # its module reads Backend rows only when asked for one.
    ("scheduler.backends.spec", "scheduler.models"),
    # The spawned scheduler process imports the backend only after django.setup().
    ("scheduler.backends.kubernetes.scheduler_process", "scheduler.backends.kubernetes.runner"),
    # AppConfig.ready() connects an app's ports and subscriptions once the registry is ready.
    ("workflows.apps", "workflows.wiring"),
    ("scheduler.apps", "scheduler.wiring"),
    # Scrape-time metric collectors read models: registered in AppConfig.ready, once loaded.
    ("pools.apps", "pools.collectors"),
    ("workflows.apps", "workflows.collectors"),
    ("scheduler.apps", "scheduler.collectors"),
    # The Celery app is imported with the osmo package, before Django is set up; its metrics
    # server (token checks: models) starts once the worker or beat is ready.
    ("osmo.celery", "osmo.observability.server"),
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


# --- only the workflows app writes the workflows tables -----------------------------------------
#
# A static finder, so it errs on the side of flagging: a value counts as "workflow data" (a model
# class, an instance, a manager or a queryset of the workflows app) when it comes from a
# workflows model (imported under any name, or through `apps.get_model`), a relation that leads
# to one (`workflow.tasks`, `pool.workflows`, `task.group`), a call or index on workflow data,
# or a variable (or loop variable) ever given workflow data in the module. A write is a write
# method called on workflow data, or SQL text that writes a `workflows_` table.

WRITE_METHODS = {"update", "delete", "create", "bulk_create", "bulk_update", "get_or_create",
                 "update_or_create", "save", "add", "remove", "clear", "set"}
WRITE_SQL = re.compile(r"""\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM|TRUNCATE(\s+TABLE)?)\s+
                           (ONLY\s+)?(["`]?\w+["`]?\.)?["`]?workflows_""",
                       re.IGNORECASE | re.VERBOSE)
WRITE_SQL_BEFORE_TABLE = re.compile(
    r"\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM|TRUNCATE(\s+TABLE)?)\s+(ONLY\s+)?$", re.IGNORECASE)
WORKFLOWS_MODULES = {"workflows.models", "workflows"}


def _workflow_schema() -> tuple[set[str], set[str], set[str]]:
    """The workflows app's model names; the relation names that lead to one of them from any
    model; those of the names that also lead elsewhere (`groups`: a user's auth groups)."""
    from django.apps import apps

    models = set(apps.get_app_config("workflows").get_models())
    leading, elsewhere = set(), set()
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if not field.is_relation or field.related_model is None:
                continue
            name = field.get_accessor_name() if field.auto_created else field.name
            (leading if field.related_model in models else elsewhere).add(name)
    return {model.__name__ for model in models}, leading, leading & elsewhere


class _WriteFinder:
    def __init__(self, tree: ast.AST):
        self.models, self.relations, self.ambiguous = _workflow_schema()
        self.model_names: set[str] = set()  # local names of workflows model classes
        self.modules: set[str] = set()  # local names of the workflows models module
        self.tainted: set[str] = set()  # variables given workflow data
        self.tree = tree
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in WORKFLOWS_MODULES:
                for alias in node.names:
                    if alias.name in self.models:
                        self.model_names.add(alias.asname or alias.name)
                    elif alias.name == "models":
                        self.modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "workflows.models":
                        self.modules.add(alias.asname or "workflows.models")
        while self._taint_assignments():  # until no new variable is found
            pass

    def _taint_assignments(self) -> bool:
        before = len(self.tainted)
        for node in ast.walk(self.tree):
            pairs = []
            if isinstance(node, ast.Assign):
                pairs = [(target, node.value) for target in node.targets]
            elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value:
                pairs = [(node.target, node.value)]
            elif isinstance(node, ast.For | ast.comprehension):
                pairs = [(node.target, node.iter)]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                pairs = [(node.optional_vars, node.context_expr)]
            for target, value in pairs:
                if self.is_workflow_data(value):
                    self.tainted |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        return len(self.tainted) > before

    def _dotted(self, node: ast.AST) -> str:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""

    def is_workflow_data(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.model_names or node.id in self.tainted
        if isinstance(node, ast.Attribute):
            if node.attr in self.models and self._dotted(node.value) in self.modules:
                return True
            if node.attr in self.relations - self.ambiguous:
                return True
            if node.attr in self.ambiguous:  # `workflow.groups`, not `user.groups`
                return self.is_workflow_data(node.value) or "workflow" in self._dotted(
                    node.value).rsplit(".", 1)[-1]
            return self.is_workflow_data(node.value)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get_model" and \
                    node.args and isinstance(node.args[0], ast.Constant) and \
                    str(node.args[0].value).split(".")[0] == "workflows":
                return True
            return self.is_workflow_data(node.func)
        if isinstance(node, ast.Subscript | ast.Starred | ast.Await):
            return self.is_workflow_data(node.value)
        return False

    def writes(self) -> list[int]:
        lines = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in WRITE_METHODS and self.is_workflow_data(node.func.value):
                lines.add(node.lineno)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and WRITE_SQL.search(node.value):
                lines.add(node.lineno)
            elif isinstance(node, ast.JoinedStr) and self._writes_a_model_table(node):
                lines.add(node.lineno)
        return sorted(lines)

    def _writes_a_model_table(self, text: ast.JoinedStr) -> bool:
        """f"UPDATE {Task._meta.db_table} ...": the table named by a workflows model."""
        for part, after in zip(text.values, text.values[1:], strict=False):
            if isinstance(part, ast.Constant) and WRITE_SQL_BEFORE_TABLE.search(str(part.value)) \
                    and isinstance(after, ast.FormattedValue) \
                    and self.is_workflow_data(after.value):
                return True
        return False


def _workflow_table_writes(tree: ast.AST) -> list[int]:
    return _WriteFinder(tree).writes()


def test_only_the_workflows_app_writes_workflows_tables(db):
    writes = {module: lines for module, path in _modules().items()
              if not module.startswith("workflows")
              and (lines := _workflow_table_writes(ast.parse(path.read_text())))}
    assert writes == {}


# Each form the finder must see: (snippet, the lines it writes on).
WRITE_FORMS = {
    "queryset chain": ("from workflows.models import Task\n"
                       "Task.objects.filter(pk=1).exclude(x=2).update(status='X')\n", [2]),
    "manager create": ("from workflows.models import Workflow\nWorkflow.objects.create()\n", [2]),
    "SQL": ("cursor.execute('UPDATE workflows_task SET x = 1')\n", [1]),
    "quoted SQL names": ('cursor.execute(\'DELETE FROM "workflows_task" WHERE id = 1\')\n'
                         "sql = 'INSERT INTO public.\"workflows_workflow\" VALUES (1)'\n"
                         "sql = 'truncate table `workflows_workflowgroup`'\n", [1, 2, 3]),
    "instance save": ("from workflows.models import Task\n"
                      "task = Task.objects.get(pk=1)\ntask.status = 'X'\ntask.save()\n", [4]),
    "new instance": ("from workflows.models import Workflow\nWorkflow(name='w').save()\n", [2]),
    "instance delete in a loop": ("from workflows.models import Task\n"
                                  "for task in Task.objects.filter(x=1):\n    task.delete()\n",
                                  [3]),
    "related manager": ("def f(workflow):\n    workflow.tasks.update(status='X')\n"
                        "    workflow.groups.all().delete()\n"
                        "    pool.workflows.filter(x=1).update(y=2)\n", [2, 3, 4]),
    "related instance": ("def f(dispatch, task):\n    dispatch.group.save()\n"
                         "    task.workflow.delete()\n", [2, 3]),
    "queryset in a variable": ("from workflows.models import Task\n"
                               "alive = Task.objects.filter(x=1)\nstale = alive.exclude(y=2)\n"
                               "stale.update(status='X')\n", [4]),
    "import alias": ("from workflows.models import Task as T\nT.objects.all().delete()\n", [2]),
    "module alias": ("from workflows import models as wm\nimport workflows.models as m2\n"
                     "import workflows.models\nwm.Task.objects.update(x=1)\n"
                     "m2.Workflow.objects.bulk_create([])\n"
                     "workflows.models.WorkflowGroup.objects.all().delete()\n", [4, 5, 6]),
    "table name from the model": ("from workflows.models import Task\n"
                                  "sql = f'UPDATE {Task._meta.db_table} SET x = 1'\n", [2]),
    "apps.get_model": ("from django.apps import apps\n"
                       "apps.get_model('workflows', 'Task').objects.update(x=1)\n"
                       "model = apps.get_model('workflows.Workflow')\nmodel.objects.create()\n",
                       [2, 4]),
}
NOT_WRITES = ("from workflows.models import Task\nTask.objects.filter(pk=1).values_list('id')\n"
              "Node.objects.filter(pk=1).update(x=1)\nuser.groups.add(group)\nnode.save()\n"
              "cursor.execute('SELECT * FROM workflows_task')\n"
              "rows = list(Task.objects.values('id'))\n")


def test_the_write_finder_sees_every_form_of_write(db):
    found = {form: _workflow_table_writes(ast.parse(snippet))
             for form, (snippet, _) in WRITE_FORMS.items()}
    assert found == {form: lines for form, (_, lines) in WRITE_FORMS.items()}
    assert _workflow_table_writes(ast.parse(NOT_WRITES)) == []
