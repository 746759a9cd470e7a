"""Parse and validate an OSMO workflow spec (v2) into :class:`WorkflowSpec`.

Every problem found is collected (path → messages) and raised once as :class:`SpecError`.

Decisions where OSMO's documents are silent (tested in tests/unit/workflow_spec):

- Names (workflow, group, task): ``^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$``, ≤ 63
  characters. Kubernetes names derived from them are sanitized by the PodGroup builder.
- What reaches a Pod or Secret unchanged is checked as the Kubernetes API server checks it
  (:mod:`workflows.spec.apiserver_rules`): environment variable names, the image (no
  surrounding whitespace), file mount paths (unique, after a relative path is taken from
  ``/``) and a task's files together at most 1 MiB (one Secret). Names, label values and
  quantities are normalized by the builders, so they always pass.
- Task names are unique across the whole workflow (``inputs: - task: X`` names a task).
- A task without ``resource:`` uses ``default``; when the spec declares no ``default``, an
  empty one applies (0 GPUs, pool defaults for cpu/memory/storage, default platform).
- Every field is strict — top level, workflow, group, task, resource, timeout, scheduling —
  and an unknown one is refused with its path and the nearest valid name (a typo like
  ``gpus:`` would silently drop GPUs from the quota check, ``comand:`` the task's command).
- GPUs must be whole numbers (the API's GPU figures are integers).
- Every declared resource's platform is checked against the pool's platforms when the caller
  passes them (``platforms=None`` skips the check, e.g. for offline linting).
- ``inputs: - task: X`` where X is in the same group is an error (a group's tasks start
  together, so the input could never be ready).
- A resource ``topology:`` list (OSMO's ``key``/``group``/``requirementType``) must be the same
  for all tasks of a group; it becomes the PodGroup's constraint (finest required key →
  ``requiredTopologyLevel``, finest preferred → ``preferredTopologyLevel``). Per-task
  placement is expressed with the ``scheduling:`` block instead (EXTENSIONS.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, NamedTuple

import yaml

from credentials.payloads import NAME as CREDENTIAL_NAME
from osmo.exit_actions import ExitActionsError, parse_exit_actions
from scheduler.core.podgroup_validation import (
    DEFAULT_TOPOLOGY_LEVELS,
    DEFAULT_TOPOLOGY_NAME,
    Topology,
)
from workflows.spec import apiserver_rules
from workflows.spec.errors import ErrorCollector, SpecError, unknown_key_message
from workflows.spec.limits import (
    DEFAULT_LIMITS,
    InputLimits,
    ItemLimit,
    LimitExceeded,
    load_yaml,
)
from workflows.spec.model import (
    FileSpec,
    GroupSpec,
    ResourceSpec,
    TaskSpec,
    TopologyRequirement,
    TopologySpec,
    WorkflowSpec,
)
from workflows.spec.scheduling import check_block_shape, leaf_names, resolve_scheduling
from workflows.spec.templating import render_template
from workflows.spec.units import (
    ascii_digits,
    parse_bytes,
    parse_duration_seconds,
    parse_millicores,
)

# libyaml's safe loader when the wheel has it (10× faster), else the pure-Python one.

NAME_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
NAME_MAX = 63
MAX_TASK_CREDENTIALS = 16
MAX_CREDENTIAL_VARIABLES = 64  # a credential holds at most 64 keys
TOP_LEVEL_KEYS = ("version", "workflow", "default-values")
RESOURCE_KEYS = ("cpu", "gpu", "memory", "storage", "platform", "topology", "nodesExcluded")
TASK_KEYS = ("name", "image", "command", "args", "lead", "resource", "inputs", "outputs",
             "files", "environment", "replicas", "subGroup", "credentials",
             "exitActions")
WORKFLOW_KEYS = ("name", "labels", "pool", "timeout", "resources", "tasks", "groups")
GROUP_KEYS = ("name", "tasks", "scheduling")
TOPOLOGY_KEYS = ("key", "group", "requirementType")
DEFAULT_RESOURCE = "default"
MAX_GPUS = 2**31 - 1  # per task: an integer column
MAX_QUANTITY = 2**63 - 1  # millicores and bytes: bigint columns


def parse_workflow_spec(
    source: str | bytes | Mapping[str, Any],
    *,
    set_variables: Sequence[str] = (),
    set_string_variables: Sequence[str] = (),
    platforms: Iterable[str] | None = None,
    default_platform: str | None = None,
    topologies: Mapping[str, object] | None = None,
    default_topology: str = DEFAULT_TOPOLOGY_NAME,
    validate_scheduling: bool = True,
    limits: InputLimits = DEFAULT_LIMITS,
) -> WorkflowSpec:
    """Render (if templated), parse and validate a workflow spec; raise :class:`SpecError`.

    ``platforms``/``default_platform``: the pool's platform names and its default. ``topologies``:
    Topology name → levels, coarsest first (default: the contract's ``osmo-topology``).
    ``validate_scheduling=False`` keeps the PodGroup webhook rules from rejecting a group's
    ``scheduling:`` block (structural errors still raise) — for tools and tests that need to
    see what a rejected shape would build; admission never turns it off. ``limits``: the
    input limits (:mod:`.limits`), checked before the work they bound.
    """
    document, rendered_text, undefined = _load_document(source, set_variables,
                                                        set_string_variables, limits)
    check_workflow_size(document, limits)
    parser = _Parser(
        platforms=None if platforms is None else frozenset(platforms),
        default_platform=default_platform,
        topologies=topologies,
        default_topology=default_topology,
        enforce_scheduling=validate_scheduling,
    )
    spec = parser.parse(document)
    return WorkflowSpec(
        name=spec.name,
        groups=spec.groups,
        resources=spec.resources,
        version=spec.version,
        labels=spec.labels,
        pool=spec.pool,
        exec_timeout_seconds=spec.exec_timeout_seconds,
        queue_timeout_seconds=spec.queue_timeout_seconds,
        undefined_variables=undefined,
        rendered_text=rendered_text,
        warnings=spec.warnings,
    )


def check_workflow_size(document: object, limits: InputLimits) -> None:
    """Refuse more groups, tasks or replicas than the limits before any is built; shapes
    that are wrong are left to the parser to report."""
    workflow = document.get("workflow") if isinstance(document, Mapping) else None
    if not isinstance(workflow, Mapping):
        return
    groups = workflow.get("groups")
    if isinstance(groups, list):
        if len(groups) > limits.max_groups:
            raise LimitExceeded("too_many_groups", "workflow.groups",
                                f"{len(groups)} groups; at most {limits.max_groups}")
        for index, group in enumerate(groups):
            scheduling = group.get("scheduling") if isinstance(group, Mapping) else None
            subgroups = scheduling.get("subGroups") if isinstance(scheduling, Mapping) else None
            if isinstance(subgroups, list) and len(subgroups) > limits.max_subgroups:
                raise LimitExceeded("too_many_subgroups",
                                    f"workflow.groups[{index}].scheduling.subGroups",
                                    f"{len(subgroups)} subgroups; at most "
                                    f"{limits.max_subgroups}")
        tasks = [(f"workflow.groups[{g}].tasks[{t}]", task)
                 for g, group in enumerate(groups) if isinstance(group, Mapping)
                 and isinstance(group.get("tasks"), list)
                 for t, task in enumerate(group["tasks"])]
    elif isinstance(workflow.get("tasks"), list):
        tasks = [(f"workflow.tasks[{t}]", task) for t, task in enumerate(workflow["tasks"])]
    else:
        return
    total = 0
    for path, task in tasks:
        replicas = task.get("replicas", 1) if isinstance(task, Mapping) else 1
        replicas = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) \
            else 1
        if replicas > limits.max_replicas:
            raise LimitExceeded("too_many_replicas", f"{path}.replicas",
                                f"{replicas} replicas; at most {limits.max_replicas}")
        total += max(replicas, 1)
    if total > limits.max_tasks:
        raise LimitExceeded("too_many_tasks", "workflow",
                            f"{total} tasks (replicas counted); at most {limits.max_tasks}")


def _load_document(
    source: str | bytes | Mapping[str, Any],
    set_variables: Sequence[str],
    set_string_variables: Sequence[str],
    limits: InputLimits,
) -> tuple[object, str | None, tuple[str, ...]]:
    """The spec as YAML data, with the rendered text and the undefined template variables
    (None and () for a spec given as data)."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError({"file": [f"not UTF-8 text: {exc}"]}) from exc
    if isinstance(source, Mapping):
        return source, None, ()
    if not isinstance(source, str):
        raise SpecError({"file": ["expected workflow YAML text"]})
    rendered = render_template(source, set_variables, set_string_variables, limits)
    try:
        document = load_yaml(rendered.text, limits, items=_counted_items(limits))
    except yaml.YAMLError as exc:
        raise SpecError({"file": [f"not valid YAML: {_yaml_problem(exc)}"]}) from exc
    return document, rendered.text, rendered.undefined_variables


def _counted_items(limits: InputLimits) -> tuple[ItemLimit, ...]:
    """Groups and task entries, counted while the YAML is scanned (before it is built)."""
    return (
        ItemLimit(frozenset({("workflow", "groups")}), limits.max_groups, "too_many_groups",
                  "workflow.groups", "groups"),
        ItemLimit(frozenset({("workflow", "tasks"), ("workflow", "groups", "*", "tasks")}),
                  limits.max_tasks, "too_many_tasks", "workflow", "tasks"),
    )


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return problem


def _scalar_text(value: object) -> str | None:
    """Strings, and numbers YAML typed for us (``args: [--epochs, 10]``), as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


class _TaskDraft:
    """A task before its group-level facts (lead, subgroup defaults) are settled."""

    def __init__(self, raw: Mapping[str, Any], path: str, group_index: int):
        self.raw = raw
        self.path = path
        self.group_index = group_index
        self.name: str = ""
        self.fields: dict[str, Any] = {}


class _GroupDraft(NamedTuple):
    """A group before its tasks are parsed: name, spec path, raw scheduling block, tasks."""

    name: str
    path: str
    scheduling: Any
    drafts: list[_TaskDraft]


class _Parser:
    def __init__(
        self,
        *,
        platforms: frozenset[str] | None,
        default_platform: str | None,
        topologies: Mapping[str, object] | None,
        default_topology: str,
        enforce_scheduling: bool,
    ):
        self.errors = ErrorCollector()
        self.platforms = platforms
        self.default_platform = default_platform
        self.topologies = topologies
        self.default_topology = default_topology
        self.enforce_scheduling = enforce_scheduling

    # ---- entry ---------------------------------------------------------------------------

    def parse(self, document: object) -> WorkflowSpec:
        errors = self.errors
        if not isinstance(document, Mapping):
            raise SpecError({"file": ["the spec must be a YAML mapping with a 'workflow' key"]})
        errors.unknown_keys(document, TOP_LEVEL_KEYS, "", "top-level field")
        version = document.get("version", 2)
        if version != 2 or isinstance(version, bool):
            errors.add("version", f"only version 2 is supported, got {version!r}")
        workflow = document.get("workflow")
        if not isinstance(workflow, Mapping):
            errors.add("workflow", "required: an object with name and tasks or groups")
            errors.raise_if_any()
            raise AssertionError("unreachable")  # pragma: no cover
        errors.unknown_keys(workflow, WORKFLOW_KEYS, "workflow", "workflow field")

        name = self._name(workflow.get("name"), "workflow.name")
        labels = self._labels(workflow.get("labels"))
        pool = workflow.get("pool")
        if pool is not None and not isinstance(pool, str):
            errors.add("workflow.pool", f"must be a pool name, got {pool!r}")
            pool = None
        exec_timeout, queue_timeout = self._timeouts(workflow.get("timeout"))
        resources = self._resources(workflow.get("resources"))
        groups = self._groups(workflow, resources)
        errors.raise_if_any()
        return WorkflowSpec(
            name=name,
            groups=groups,
            resources=MappingProxyType(resources),
            labels=MappingProxyType(labels),
            pool=pool,
            exec_timeout_seconds=exec_timeout,
            queue_timeout_seconds=queue_timeout,
            warnings=MappingProxyType({k: tuple(v) for k, v in errors.warnings.items()}),
        )

    # ---- small fields --------------------------------------------------------------------

    def _name(self, value: object, path: str) -> str:
        if not isinstance(value, str) or not value:
            self.errors.add(path, "required: a name")
            return ""
        if len(value) > NAME_MAX or not NAME_PATTERN.match(value):
            self.errors.add(path, f"'{value}' is not a valid name (letters, digits, '-', '_', "
                                  f"'.'; starts and ends alphanumeric; ≤ {NAME_MAX} characters)")
        return value

    def _labels(self, raw: object) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.errors.add("workflow.labels", "must be a mapping of label names to values")
            return {}
        labels: dict[str, str] = {}
        for key, value in raw.items():
            text = _scalar_text(value) if not isinstance(value, bool) else str(value).lower()
            if text is None:
                self.errors.add(f"workflow.labels.{key}", f"must be a scalar, got {value!r}")
                continue
            labels[str(key)] = text
        return labels

    def _timeouts(self, raw: object) -> tuple[int | None, int | None]:
        if raw is None:
            return None, None
        if not isinstance(raw, Mapping):
            self.errors.add("workflow.timeout", "must be an object (exec_timeout, queue_timeout)")
            return None, None
        out: dict[str, int | None] = {"exec_timeout": None, "queue_timeout": None}
        for key, value in raw.items():
            path = f"workflow.timeout.{key}"
            if key not in out:
                self.errors.add(path, unknown_key_message(str(key), tuple(out), "timeout field"))
                continue
            try:
                out[key] = parse_duration_seconds(value)
            except ValueError as exc:
                self.errors.add(path, str(exc))
        return out["exec_timeout"], out["queue_timeout"]

    # ---- resources -----------------------------------------------------------------------

    def _resources(self, raw: object) -> dict[str, ResourceSpec]:
        resources: dict[str, ResourceSpec] = {}
        if raw is None:
            return resources
        if not isinstance(raw, Mapping):
            self.errors.add("workflow.resources", "must map resource names to "
                                                  "{cpu, gpu, memory, storage, platform}")
            return resources
        for name, body in raw.items():
            path = f"workflow.resources.{name}"
            resources[str(name)] = self._resource(str(name), body, path)
        return resources

    def _resource(self, name: str, body: object, path: str) -> ResourceSpec:
        errors = self.errors
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            errors.add(path, "must be an object {cpu, gpu, memory, storage, platform}")
            return ResourceSpec(name=name)
        errors.unknown_keys(body, RESOURCE_KEYS, path, "resource field")
        gpus = 0
        if body.get("gpu") is not None:
            gpus = self._gpus(body["gpu"], f"{path}.gpu")
        cpu = self._quantity(body.get("cpu"), f"{path}.cpu", parse_millicores)
        memory = self._quantity(body.get("memory"), f"{path}.memory", parse_bytes)
        storage = self._quantity(body.get("storage"), f"{path}.storage", parse_bytes)
        platform = body.get("platform")
        if platform is not None and not isinstance(platform, str):
            errors.add(f"{path}.platform", f"must be a platform name, got {platform!r}")
            platform = None
        if platform is not None and self.platforms is not None \
                and platform not in self.platforms:
            known = ", ".join(sorted(self.platforms)) or "none"
            errors.add(f"{path}.platform", f"unknown platform '{platform}' (the pool's "
                                           f"platforms: {known})")
        topology = self._resource_topology(body.get("topology"), f"{path}.topology")
        extra = {"nodesExcluded": body["nodesExcluded"]} if "nodesExcluded" in body else {}
        return ResourceSpec(
            name=name,
            gpus=gpus,
            cpu_millicores=cpu,
            memory_bytes=memory,
            storage_bytes=storage,
            platform=platform,
            topology=topology,
            extra=MappingProxyType(extra),
        )

    def _gpus(self, value: object, path: str) -> int:
        if isinstance(value, str) and ascii_digits(value) is not None:
            value = ascii_digits(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.errors.add(path, f"must be a whole number of GPUs ≥ 0, got {value!r}")
            return 0
        if value > MAX_GPUS:
            self.errors.add(path, f"must be at most {MAX_GPUS} GPUs, got {value}")
            return 0
        return value

    def _quantity(self, value: object, path: str, parse: Any) -> int | None:
        if value is None:
            return None
        try:
            quantity = parse(value)
        except ValueError as exc:
            self.errors.add(path, str(exc))
            return None
        if quantity > MAX_QUANTITY:
            self.errors.add(path, f"{value!r} is larger than this platform stores")
            return None
        return quantity

    def _topology(self) -> Topology:
        if self.topologies and self.default_topology in self.topologies:
            levels = self.topologies[self.default_topology]
            return levels if isinstance(levels, Topology) else Topology(levels)  # type: ignore
        return Topology(DEFAULT_TOPOLOGY_LEVELS)

    def _resource_topology(self, raw: object, path: str) -> tuple[TopologyRequirement, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.errors.add(path, "must be a list of {key, group, requirementType}")
            return ()
        topology = self._topology()
        out: list[TopologyRequirement] = []
        for index, entry in enumerate(raw):
            item_path = f"{path}[{index}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
                self.errors.add(item_path, "must be an object with a key (a topology level)")
                continue
            self.errors.unknown_keys(entry, TOPOLOGY_KEYS, item_path, "topology field")
            key = entry["key"]
            if not topology.has(key):
                self.errors.add(f"{item_path}.key", f"'{key}' is not a topology level (levels: "
                                                    f"{', '.join(topology.names())})")
            kind = entry.get("requirementType", "required")
            if kind not in ("required", "preferred"):
                self.errors.add(f"{item_path}.requirementType",
                                f"must be required or preferred, got {kind!r}")
            group = entry.get("group", "default")
            out.append(TopologyRequirement(key=key, group=str(group),
                                           required=kind != "preferred"))
        return tuple(out)

    # ---- groups and tasks ----------------------------------------------------------------

    def _groups(
        self, workflow: Mapping[str, Any], resources: dict[str, ResourceSpec]
    ) -> tuple[GroupSpec, ...]:
        layout = self._layout(workflow)
        if layout is None:
            return ()
        self._check_group_names(layout)
        task_home = self._task_homes(layout)
        group_specs: list[GroupSpec] = []
        dependencies: list[list[str]] = []
        for group_index, group in enumerate(layout):
            block = check_block_shape(group.scheduling, f"{group.path}.scheduling", self.errors)
            leaves = leaf_names(block) if block else set()
            tasks = [self._task(draft, resources, block, leaves, task_home, group_index)
                     for draft in group.drafts]
            lead = self._lead(tasks, group.path)
            if len(tasks) == 1:
                tasks = [replace(tasks[0], lead=True)]  # a single task leads its group
            depends = self._group_dependencies(tasks, task_home, group_index, layout)
            dependencies.append(depends)
            group_specs.append(self._group(group.name, group.path, tasks, lead, depends, block))
        self._check_cycles(layout, dependencies)
        return tuple(group_specs)

    def _layout(self, workflow: Mapping[str, Any]) -> list[_GroupDraft] | None:
        """The workflow's groups before parsing their tasks; None when there are none to parse."""
        has_groups, has_tasks = "groups" in workflow, "tasks" in workflow
        if has_groups and has_tasks:
            self.errors.add("workflow", "use either tasks or groups, not both")
            return None
        if not has_groups and not has_tasks:
            self.errors.add("workflow", "required: tasks or groups")
            return None
        if has_tasks:
            return self._layout_of_tasks(workflow["tasks"])
        return self._layout_of_groups(workflow["groups"])

    def _layout_of_tasks(self, raw_tasks: object) -> list[_GroupDraft] | None:
        """`tasks:` form: each task is a group of its own, named `{task}-group`."""
        if not isinstance(raw_tasks, list) or not raw_tasks:
            self.errors.add("workflow.tasks", "must be a non-empty list of tasks")
            return None
        layout: list[_GroupDraft] = []
        for index, raw in enumerate(raw_tasks):
            path = f"workflow.tasks[{index}]"
            draft = _TaskDraft(raw if isinstance(raw, Mapping) else {}, path, len(layout))
            if not isinstance(raw, Mapping):
                self.errors.add(path, "a task must be an object")
            task_name = raw.get("name") if isinstance(raw, Mapping) else None
            group_name = f"{task_name}-group" if isinstance(task_name, str) else ""
            layout.append(_GroupDraft(group_name, path, None, [draft]))
        return layout

    def _layout_of_groups(self, raw_groups: object) -> list[_GroupDraft] | None:
        if not isinstance(raw_groups, list) or not raw_groups:
            self.errors.add("workflow.groups", "must be a non-empty list of groups")
            return None
        layout: list[_GroupDraft] = []
        for index, raw in enumerate(raw_groups):
            path = f"workflow.groups[{index}]"
            if not isinstance(raw, Mapping):
                self.errors.add(path, "a group must be an object with name and tasks")
                continue
            group_name = self._name(raw.get("name"), f"{path}.name")
            self.errors.unknown_keys(raw, GROUP_KEYS, path, "group field")
            raw_tasks = raw.get("tasks")
            if not isinstance(raw_tasks, list) or not raw_tasks:
                self.errors.add(f"{path}.tasks", "must be a non-empty list of tasks")
                raw_tasks = []
            drafts = []
            for task_index, raw_task in enumerate(raw_tasks):
                task_path = f"{path}.tasks[{task_index}]"
                if not isinstance(raw_task, Mapping):
                    self.errors.add(task_path, "a task must be an object")
                    raw_task = {}
                drafts.append(_TaskDraft(raw_task, task_path, len(layout)))
            layout.append(_GroupDraft(group_name, path, raw.get("scheduling"), drafts))
        return layout

    def _check_group_names(self, layout: list[_GroupDraft]) -> None:
        seen_groups: dict[str, str] = {}
        for group in layout:
            if group.name and group.name in seen_groups:
                self.errors.add(f"{group.path}.name", f"duplicate group name '{group.name}' "
                                                      f"(also {seen_groups[group.name]})")
            seen_groups.setdefault(group.name, group.path)

    def _task_homes(self, layout: list[_GroupDraft]) -> dict[str, int]:
        """Names every task (unique across the workflow); task name → its group's index."""
        task_home: dict[str, int] = {}
        task_paths: dict[str, str] = {}
        for group in layout:
            for draft in group.drafts:
                draft.name = self._name(draft.raw.get("name"), f"{draft.path}.name")
                if not draft.name:
                    continue
                if draft.name in task_home:
                    self.errors.add(f"{draft.path}.name", f"duplicate task name '{draft.name}' "
                                                          f"(also {task_paths[draft.name]})")
                    continue
                task_home[draft.name] = draft.group_index
                task_paths[draft.name] = draft.path
        return task_home

    @staticmethod
    def _group_dependencies(tasks: list[TaskSpec], task_home: dict[str, int], group_index: int,
                            layout: list[_GroupDraft]) -> list[str]:
        """The other groups whose tasks this group's tasks take inputs from, first seen first."""
        depends: list[str] = []
        for task in tasks:
            for dependency in task.depends_on:
                home = task_home.get(dependency)
                if home is not None and home != group_index:
                    name = layout[home].name
                    if name not in depends:
                        depends.append(name)
        return depends

    def _lead(self, tasks: list[TaskSpec], group_path: str) -> str:
        if not tasks:
            return ""  # already reported: a group needs tasks
        if len(tasks) == 1:
            return tasks[0].name
        leads = [task for task in tasks if task.lead]
        if len(leads) != 1:
            names = ", ".join(task.name for task in leads) or "none"
            self.errors.add(f"{group_path}.tasks", f"exactly one task of a multi-task group must "
                                                   f"have lead: true (found {len(leads)}: {names})")
            return leads[0].name if leads else (tasks[0].name if tasks else "")
        return leads[0].name

    def _str_list(self, value: object, path: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.errors.add(path, f"must be a list of strings, got {type(value).__name__}")
            return ()
        out = []
        for index, item in enumerate(value):
            text = _scalar_text(item)
            if text is None:
                self.errors.add(f"{path}[{index}]", f"must be a string, got {item!r}")
                continue
            out.append(text)
        return tuple(out)

    def _task(
        self,
        draft: _TaskDraft,
        resources: dict[str, ResourceSpec],
        block: Mapping[str, Any] | None,
        leaves: set[str],
        task_home: dict[str, int],
        group_index: int,
    ) -> TaskSpec:
        errors, raw, path = self.errors, draft.raw, draft.path
        errors.unknown_keys(raw, TASK_KEYS, path, "task field")
        image = raw.get("image")
        if not isinstance(image, str) or not image.strip():
            errors.add(f"{path}.image", "required: a container image")
            image = ""
        for problem in apiserver_rules.image(image) if image else ():
            errors.add(f"{path}.image", problem)
        command = self._str_list(raw.get("command"), f"{path}.command")
        args = self._str_list(raw.get("args"), f"{path}.args")
        lead = raw.get("lead", False)
        if not isinstance(lead, bool):
            errors.add(f"{path}.lead", f"must be true or false, got {lead!r}")
            lead = False
        resource = self._task_resource(raw.get("resource", DEFAULT_RESOURCE), path, resources)
        replicas = raw.get("replicas", 1)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            errors.add(f"{path}.replicas", f"must be an integer ≥ 1, got {replicas!r}")
            replicas = 1
        subgroup = self._subgroup(raw.get("subGroup"), draft, block, leaves)
        inputs, depends = self._inputs(raw.get("inputs"), f"{path}.inputs", task_home,
                                       group_index)
        outputs = self._outputs(raw.get("outputs"), f"{path}.outputs")
        files = self._files(raw.get("files"), f"{path}.files")
        environment = self._environment(raw.get("environment"), f"{path}.environment")
        credentials = self._credentials(raw.get("credentials"), f"{path}.credentials",
                                        environment, [f.path for f in files])
        try:
            exit_actions = parse_exit_actions(raw.get("exitActions"))
        except ExitActionsError as exc:
            errors.add(f"{path}.exitActions{exc.path}", str(exc))
            exit_actions = {}
        return TaskSpec(
            name=draft.name,
            image=image,
            command=command,
            args=args,
            lead=lead,
            resource=resource,
            platform=resource.platform or self.default_platform,
            replicas=replicas,
            subgroup=subgroup,
            depends_on=depends,
            inputs=tuple(MappingProxyType(dict(item)) for item in inputs),
            outputs=outputs,
            files=files,
            environment=MappingProxyType(environment),
            credentials=MappingProxyType(credentials),
            exit_actions=MappingProxyType(exit_actions),
            path=path,
        )

    def _task_resource(self, resource_name: object, path: str,
                       resources: dict[str, ResourceSpec]) -> ResourceSpec:
        """The declared resource a task names; `default` may go undeclared (an empty one)."""
        if not isinstance(resource_name, str):
            self.errors.add(f"{path}.resource",
                            f"must be a resource name, got {resource_name!r}")
            resource_name = DEFAULT_RESOURCE
        if resource_name in resources:
            return resources[resource_name]
        if resource_name == DEFAULT_RESOURCE:
            return ResourceSpec(name=DEFAULT_RESOURCE)
        known = ", ".join(resources) or "none declared"
        self.errors.add(f"{path}.resource", f"unknown resource '{resource_name}' (workflow."
                                            f"resources: {known})")
        return ResourceSpec(name=resource_name)

    def _subgroup(self, subgroup: object, draft: _TaskDraft, block: Mapping[str, Any] | None,
                  leaves: set[str]) -> str | None:
        """The leaf subgroup of the task's pods: named by the task, or the leaf named like the
        task; None when the group's scheduling block defines no subgroups."""
        path = f"{draft.path}.subGroup"
        has_subgroups = bool(block and isinstance(block.get("subGroups"), list)
                             and block["subGroups"])
        if subgroup is not None and not isinstance(subgroup, str):
            self.errors.add(path, f"must be a subgroup name, got {subgroup!r}")
            subgroup = None
        if subgroup is not None and not has_subgroups:
            self.errors.add(path, f"subGroup '{subgroup}' needs the group's "
                                  "scheduling.subGroups to define it")
            subgroup = None
        if subgroup is None and has_subgroups:
            if draft.name in leaves:
                subgroup = draft.name  # a leaf named like the task is its default
            else:
                self.errors.add(path, "required when the group defines scheduling.subGroups: "
                                      "the leaf subgroup of this task's pods")
        return subgroup

    def _inputs(
        self, raw: object, path: str, task_home: dict[str, int], group_index: int
    ) -> tuple[list[Mapping[str, Any]], tuple[str, ...]]:
        if raw is None:
            return [], ()
        if not isinstance(raw, list):
            self.errors.add(path, "must be a list of inputs (task:, dataset:, url:)")
            return [], ()
        inputs: list[Mapping[str, Any]] = []
        depends: list[str] = []
        for index, item in enumerate(raw):
            item_path = f"{path}[{index}]"
            if not isinstance(item, Mapping):
                self.errors.add(item_path, "an input must be an object (task:, dataset:, url:)")
                continue
            inputs.append(item)
            if "task" not in item:
                continue
            name = item["task"]
            if not isinstance(name, str) or name not in task_home:
                self.errors.add(f"{item_path}.task", f"unknown task {name!r}")
                continue
            if task_home[name] == group_index:
                self.errors.add(f"{item_path}.task", f"task '{name}' is in the same group; a "
                                                     "group's tasks start together, so its "
                                                     "output could never be ready")
                continue
            if name not in depends:
                depends.append(name)
        return inputs, tuple(depends)

    def _outputs(self, raw: object, path: str) -> tuple[Mapping[str, Any], ...]:
        """Kept as given; a bare value becomes ``{value: ...}``."""
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.errors.add(path, "must be a list")
            return ()
        return tuple(MappingProxyType(dict(item)) if isinstance(item, Mapping)
                     else MappingProxyType({"value": item}) for item in raw)

    def _files(self, raw: object, path: str) -> tuple[FileSpec, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.errors.add(path, "must be a list of {path, contents}")
            return ()
        files = []
        paths: list[tuple[str, str]] = []
        for index, item in enumerate(raw):
            item_path = f"{path}[{index}]"
            if not isinstance(item, Mapping):
                self.errors.add(item_path, "a file must be an object {path, contents}")
                continue
            target = item.get("path")
            if not isinstance(target, str) or not target:
                self.errors.add(f"{item_path}.path", "required: where the file is mounted")
            contents = item.get("contents")
            localpath = item.get("localpath")
            if contents is None:
                if localpath is not None:
                    self.errors.add(f"{item_path}.localpath",
                                    f"local file '{localpath}' must arrive inlined as contents: "
                                    "(the CLI inlines localpath files before submitting)")
                else:
                    self.errors.add(f"{item_path}.contents", "required: the file's contents")
                continue
            if not isinstance(contents, str):
                self.errors.add(f"{item_path}.contents", "must be text")
                continue
            files.append(FileSpec(path=str(target or ""), contents=contents,
                                  localpath=localpath if isinstance(localpath, str) else None))
            paths.append((item_path, target if isinstance(target, str) else ""))
        # Each file is mounted at its path (a relative one from "/"), from one Secret per task.
        mounted = [p if p.startswith("/") or not p else f"/{p}" for _, p in paths]
        for index, problems in apiserver_rules.mount_paths(mounted).items():
            if paths[index][1]:  # an empty path is reported above
                for problem in problems:
                    self.errors.add(f"{paths[index][0]}.path", problem)
        for problem in apiserver_rules.secret_size([f.contents for f in files]):
            self.errors.add(path, problem)
        return tuple(files)

    def _environment(self, raw: object, path: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.errors.add(path, "must map variable names to values")
            return {}
        out = {}
        for key, value in raw.items():
            for problem in apiserver_rules.env_var_name(str(key)):
                self.errors.add(f"{path}.{key}", problem)
            if isinstance(value, bool):
                out[str(key)] = str(value).lower()
                continue
            text = "" if value is None else _scalar_text(value)
            if text is None:
                self.errors.add(f"{path}.{key}", f"must be a scalar, got {value!r}")
                continue
            out[str(key)] = text
        return out

    def _credentials(self, raw: object, path: str, environment: Mapping[str, str],
                     file_paths: list[str]) -> dict[str, str | Mapping[str, str] | None]:
        """Names and where each goes; whose they are and their keys are admission's checks."""
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.errors.add(path, "must map credential names to a mount path or to "
                                  "{VARIABLE: key}")
            return {}
        if len(raw) > MAX_TASK_CREDENTIALS:
            self.errors.add(path, f"at most {MAX_TASK_CREDENTIALS} credentials per task")
            return {}
        out: dict[str, str | Mapping[str, str] | None] = {}
        mounts = [p if p.startswith("/") else f"/{p}" for p in file_paths if p]
        for name, use in raw.items():
            where = f"{path}.{name}"
            if not isinstance(name, str) or not CREDENTIAL_NAME.match(name) or len(name) > 63:
                self.errors.add(path, f"{str(name)[:64]!r} is not a credential name")
                continue
            if use is None or use == {}:
                out[name] = None
            elif isinstance(use, str) and use.strip():
                mount = use if use.startswith("/") else f"/{use}"
                if mount in mounts:
                    self.errors.add(where, f"'{mount}' is mounted twice (mount paths must "
                                           "be unique)")
                mounts.append(mount)
                out[name] = mount
            elif isinstance(use, Mapping) and len(use) > MAX_CREDENTIAL_VARIABLES:
                self.errors.add(where, f"at most {MAX_CREDENTIAL_VARIABLES} variables")
            elif isinstance(use, Mapping):
                variables: dict[str, str] = {}
                for variable, key in use.items():
                    for problem in apiserver_rules.env_var_name(str(variable)):
                        self.errors.add(f"{where}.{variable}", problem)
                    if str(variable) in environment:
                        self.errors.add(f"{where}.{variable}", "set by environment too")
                    if not isinstance(key, str) or not key:
                        self.errors.add(f"{where}.{variable}", "must name a key of the "
                                                               "credential")
                        continue
                    variables[str(variable)] = key
                out[name] = MappingProxyType(variables)
            else:
                self.errors.add(where, "must be a mount path or {VARIABLE: key}")
        return out

    def _group(
        self,
        name: str,
        path: str,
        tasks: list[TaskSpec],
        lead: str,
        depends: list[str],
        block: Mapping[str, Any] | None,
    ) -> GroupSpec:
        min_member = min_sub_group = None
        topology: TopologySpec | None = None
        subgroups: tuple = ()
        if block is not None:
            result = resolve_scheduling(
                block,
                group_path=path,
                task_pods=[(t.path, t.name, t.subgroup, t.replicas) for t in tasks],
                errors=self.errors,
                topologies=self.topologies,
                default_topology=self.default_topology,
                enforce=self.enforce_scheduling,
            )
            min_member, min_sub_group = result.min_member, result.min_sub_group
            topology, subgroups = result.topology, result.subgroups
        resource_topology = self._uniform_resource_topology(tasks, path)
        if resource_topology is not None:
            if topology is not None:
                self.errors.add(f"{path}.scheduling.topologyConstraint",
                                "the tasks' resources already carry topology requirements; "
                                "use one or the other")
            else:
                topology = resource_topology
        return GroupSpec(
            name=name,
            tasks=tuple(tasks),
            lead=lead,
            depends_on=tuple(depends),
            min_member=min_member,
            min_sub_group=min_sub_group,
            topology=topology,
            subgroups=subgroups,
            path=path,
        )

    def _uniform_resource_topology(self, tasks: list[TaskSpec], path: str) -> TopologySpec | None:
        shapes = {frozenset(task.resource.topology) for task in tasks}
        if not tasks or shapes == {frozenset()}:
            return None
        if len(shapes) > 1:
            self.errors.add(path, "the tasks' resources carry different topology requirements; "
                                  "a group's tasks must share them (use the scheduling: block "
                                  "for per-task placement)")
            return None
        requirements = tasks[0].resource.topology
        groups = {req.key: req.group for req in requirements}
        if len(groups) != len(requirements):
            self.errors.add(path, "a topology key appears twice in the resource's topology")
            return None
        topology = self._topology()

        def finest(required: bool) -> str | None:
            keys = [r.key for r in requirements if r.required is required and topology.has(r.key)]
            return max(keys, key=topology.rank) if keys else None

        return TopologySpec(required_level=finest(True), preferred_level=finest(False))

    def _check_cycles(self, layout: list[_GroupDraft], dependencies: list[list[str]]) -> None:
        index_of = {group.name: index for index, group in enumerate(layout)}
        state: dict[int, int] = {}  # 1 = on stack, 2 = done
        reported: set[frozenset[int]] = set()

        def visit(index: int, stack: list[int]) -> None:
            state[index] = 1
            stack.append(index)
            for name in dependencies[index]:
                target = index_of.get(name)
                if target is None:
                    continue
                if state.get(target) == 1:
                    cycle = stack[stack.index(target):]
                    key = frozenset(cycle)
                    if key not in reported:
                        reported.add(key)
                        names = [layout[i].name for i in cycle] + [layout[target].name]
                        self.errors.add(layout[target].path,
                                        "dependency cycle between groups: " + " -> ".join(names))
                elif target not in state:
                    visit(target, stack)
            stack.pop()
            state[index] = 2

        for index in range(len(layout)):
            if index not in state:
                visit(index, [])
