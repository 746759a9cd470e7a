"""Every error path of the parser, with its field path and message."""

from __future__ import annotations

import pytest
import yaml

from workflows.spec import SpecError, parse_workflow_spec


def errors_of(spec: object, **kwargs) -> dict[str, list[str]]:
    text = spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False)
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(text, **kwargs)
    return caught.value.errors


def wf(**workflow) -> dict:
    base = {"name": "w", "tasks": [{"name": "a", "image": "busybox"}]}
    base.update(workflow)
    return {"workflow": base}


def group(*tasks, **extra) -> dict:
    return {"name": "g", "tasks": list(tasks), **extra}


def task(name: str, **extra) -> dict:
    return {"name": name, "image": "busybox", **extra}


def test_document_level() -> None:
    # libyaml's parser (the wheel ships it) words the error; the position is 1-based.
    assert errors_of("a: [") == {"file": [
        "not valid YAML: did not find expected node content (line 2, column 1)"]}
    assert errors_of("- a\n") == {"file": ["the spec must be a YAML mapping with a 'workflow' "
                                           "key"]}
    assert errors_of({"version": 3, "extra": 1, "workflow": 5}) == {
        "extra": ["unknown top-level field 'extra' (known: version, workflow, default-values)"],
        "version": ["only version 2 is supported, got 3"],
        "workflow": ["required: an object with name and tasks or groups"],
    }
    assert errors_of({"version": True, **wf()}) == {"version": [
        "only version 2 is supported, got True"]}
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(b"\xff\xfe")
    assert list(caught.value.errors) == ["file"]
    with pytest.raises(SpecError):
        parse_workflow_spec(42)  # type: ignore[arg-type]
    assert parse_workflow_spec(yaml.safe_dump({"version": 2, **wf()})).version == 2


def test_workflow_level() -> None:
    assert errors_of({"workflow": {"name": "bad name!", "tasks": [], "groups": []}}) == {
        "workflow.name": ["'bad name!' is not a valid name (letters, digits, '-', '_', '.'; "
                          "starts and ends alphanumeric; ≤ 63 characters)"],
        "workflow": ["use either tasks or groups, not both"],
    }
    assert errors_of({"workflow": {"name": "w"}}) == {"workflow": ["required: tasks or groups"]}
    assert errors_of(wf(name=None, tasks=[])) == {
        "workflow.name": ["required: a name"],
        "workflow.tasks": ["must be a non-empty list of tasks"],
    }
    assert errors_of(wf(tasks=None, groups=None) | {"workflow": {
        "name": "w", "groups": {}}}) == {"workflow.groups": [
            "must be a non-empty list of groups"]}
    assert errors_of(wf(labels=[1], pool=3, timeout={"exec_timeout": "soon", "x": 1})) == {
        "workflow.labels": ["must be a mapping of label names to values"],
        "workflow.pool": ["must be a pool name, got 3"],
        "workflow.timeout.exec_timeout": [
            "'soon' is not a duration (e.g. 10m, 8h, 2d, 45s, PT10S)"],
        "workflow.timeout.x": ["unknown timeout field 'x' (known: exec_timeout, "
                               "queue_timeout)"],
    }
    assert errors_of(wf(labels={"a": [1]}, timeout="1h")) == {
        "workflow.labels.a": ["must be a scalar, got [1]"],
        "workflow.timeout": ["must be an object (exec_timeout, queue_timeout)"],
    }
    ok = parse_workflow_spec(yaml.safe_dump(wf(labels={"team": "a", "n": 1, "on": True},
                                               pool="team", timeout={"queue_timeout": "1h30m"})))
    assert (dict(ok.labels), ok.pool, ok.queue_timeout_seconds) == (
        {"team": "a", "n": "1", "on": "true"}, "team", 5400)


def test_resource_errors() -> None:
    resources = {
        "default": {"gpus": 8, "cpu": "lots", "memory": "4Gb", "storage": -1},
        "frac": {"gpu": 0.5},
        "neg": {"gpu": -1, "platform": 7},
        "shape": [1],
        "topo": {"topology": [{"key": "row"}, {"key": "rack", "requirementType": "maybe",
                                               "x": 1}, "bad"]},
        "topo2": {"topology": "rack"},
    }
    errors = errors_of(wf(resources=resources))
    assert errors == {
        "workflow.resources.default.gpus": ["unknown resource field 'gpus', did you mean 'gpu'? "
                                            "(known: cpu, gpu, "
                                            "memory, storage, platform, topology, "
                                            "nodesExcluded)"],
        "workflow.resources.default.cpu": ["'lots' is not a quantity (e.g. 4Gi, 512Mi, 500m, "
                                           "2)"],
        "workflow.resources.default.memory": ["'4Gb' has an unknown unit 'Gb'"],
        "workflow.resources.default.storage": ["must not be negative, got -1"],
        "workflow.resources.frac.gpu": ["must be a whole number of GPUs ≥ 0, got 0.5"],
        "workflow.resources.neg.gpu": ["must be a whole number of GPUs ≥ 0, got -1"],
        "workflow.resources.neg.platform": ["must be a platform name, got 7"],
        "workflow.resources.shape": ["must be an object {cpu, gpu, memory, storage, platform}"],
        "workflow.resources.topo.topology[0].key": [
            "'row' is not a topology level (levels: zone, block, rack, hostname)"],
        "workflow.resources.topo.topology[1].x": [
            "unknown topology field 'x' (known: key, group, requirementType)"],
        "workflow.resources.topo.topology[1].requirementType": [
            "must be required or preferred, got 'maybe'"],
        "workflow.resources.topo.topology[2]": [
            "must be an object with a key (a topology level)"],
        "workflow.resources.topo2.topology": ["must be a list of {key, group, "
                                              "requirementType}"],
    }
    assert errors_of(wf(resources=[1])) == {"workflow.resources": [
        "must map resource names to {cpu, gpu, memory, storage, platform}"]}
    spec = parse_workflow_spec(yaml.safe_dump(wf(resources={
        "default": {"gpu": "2", "cpu": 0.25, "memory": "1.5Gi", "nodesExcluded": ["n1"]},
        "empty": None})))
    default = spec.resources["default"]
    assert (default.gpus, default.cpu_millicores, default.memory_bytes,
            dict(default.extra)) == (2, 250, 1610612736, {"nodesExcluded": ["n1"]})
    assert spec.resources["empty"].gpus == 0


def test_task_errors() -> None:
    tasks = [
        {"name": "a", "image": "", "command": "echo", "args": [1, {"x": 1}], "lead": "yes",
         "resource": "missing", "replicas": 0, "inputs": "x", "outputs": {}, "files": {},
         "environment": [1]},
        {"name": "b", "image": "x", "resource": 5, "replicas": True,
         "inputs": [5, {"task": "nope"}, {"task": 3}, {"dataset": {"name": "d"}}],
         "files": [5, {"contents": "x"}, {"path": "/p"}, {"path": "/q", "contents": 1}],
         "environment": {"A": [1]}},
        "nope",
    ]
    errors = errors_of(wf(tasks=tasks))
    assert errors == {
        "workflow.tasks[2]": ["a task must be an object"],
        "workflow.tasks[2].name": ["required: a name"],
        "workflow.tasks[2].image": ["required: a container image"],
        "workflow.tasks[0].image": ["required: a container image"],
        "workflow.tasks[0].command": ["must be a list of strings, got str"],
        "workflow.tasks[0].args[1]": ["must be a string, got {'x': 1}"],
        "workflow.tasks[0].lead": ["must be true or false, got 'yes'"],
        "workflow.tasks[0].resource": ["unknown resource 'missing' (workflow.resources: none "
                                       "declared)"],
        "workflow.tasks[0].replicas": ["must be an integer ≥ 1, got 0"],
        "workflow.tasks[0].inputs": ["must be a list of inputs (task:, dataset:, url:)"],
        "workflow.tasks[0].outputs": ["must be a list"],
        "workflow.tasks[0].files": ["must be a list of {path, contents}"],
        "workflow.tasks[0].environment": ["must map variable names to values"],
        "workflow.tasks[1].resource": ["must be a resource name, got 5"],
        "workflow.tasks[1].replicas": ["must be an integer ≥ 1, got True"],
        "workflow.tasks[1].inputs[0]": ["an input must be an object (task:, dataset:, url:)"],
        "workflow.tasks[1].inputs[1].task": ["unknown task 'nope'"],
        "workflow.tasks[1].inputs[2].task": ["unknown task 3"],
        "workflow.tasks[1].files[0]": ["a file must be an object {path, contents}"],
        "workflow.tasks[1].files[1].path": ["required: where the file is mounted"],
        "workflow.tasks[1].files[2].contents": ["required: the file's contents"],
        "workflow.tasks[1].files[3].contents": ["must be text"],
        "workflow.tasks[1].environment.A": ["must be a scalar, got [1]"],
    }


def test_names_leads_and_groups() -> None:
    spec = {"workflow": {"name": "w", "groups": [
        group(task("a"), task("b")),
        {"name": "g", "tasks": [task("a", lead=True), task("c", lead=True)]},
        {"name": "h", "tasks": []},
        "bad",
    ]}}
    assert errors_of(spec) == {
        "workflow.groups[0].tasks": ["exactly one task of a multi-task group must have lead: "
                                     "true (found 0: none)"],
        "workflow.groups[1].tasks": ["exactly one task of a multi-task group must have lead: "
                                     "true (found 2: a, c)"],
        "workflow.groups[1].name": ["duplicate group name 'g' (also workflow.groups[0])"],
        "workflow.groups[1].tasks[0].name": ["duplicate task name 'a' (also "
                                             "workflow.groups[0].tasks[0])"],
        "workflow.groups[2].tasks": ["must be a non-empty list of tasks"],
        "workflow.groups[3]": ["a group must be an object with name and tasks"],
    }


def test_dependencies() -> None:
    spec = {"workflow": {"name": "w", "groups": [
        {"name": "g1", "tasks": [task("a", inputs=[{"task": "c"}])]},
        {"name": "g2", "tasks": [task("b", inputs=[{"task": "a"}]),
                                 task("b2", lead=True, inputs=[{"task": "b"}])]},
        {"name": "g3", "tasks": [task("c", inputs=[{"task": "b"}, {"task": "b2"}])]},
    ]}}
    assert errors_of(spec) == {
        "workflow.groups[1].tasks[1].inputs[0].task": [
            "task 'b' is in the same group; a group's tasks start together, so its output "
            "could never be ready"],
        "workflow.groups[0]": ["dependency cycle between groups: g1 -> g3 -> g2 -> g1"],
    }
    ok = parse_workflow_spec(yaml.safe_dump({"workflow": {"name": "w", "groups": [
        {"name": "g1", "tasks": [task("a")]},
        {"name": "g2", "tasks": [task("b", inputs=[{"task": "a"}, {"task": "a"}])]},
    ]}}))
    assert ok.groups[1].depends_on == ("g1",)
    assert ok.tasks[1].depends_on == ("a",)


def test_scheduling_errors_map_to_spec_paths() -> None:
    spec = {"workflow": {"name": "w", "groups": [{
        "name": "g",
        "scheduling": {"minSubGroup": 3, "subGroups": [
            {"name": "mid", "minSubGroup": 1},
            {"name": "leaf", "parent": "mid", "minMember": 2, "size": 1},
            {"name": "other", "minMember": 1},
        ]},
        "tasks": [task("a", lead=True, subGroup="mid"), task("b", subGroup="ghost"),
                  task("c"), task("leaf", replicas=2), task("d", subGroup=7)],
    }]}}
    assert errors_of(spec) == {
        "workflow.groups[0].scheduling.subGroups[1].size": [
            "unknown subgroup field 'size' (known: name, parent, minMember, minSubGroup, "
            "topologyConstraint)"],
        "workflow.groups[0].tasks[2].subGroup": [
            "required when the group defines scheduling.subGroups: the leaf subgroup of this "
            "task's pods"],
        "workflow.groups[0].tasks[4].subGroup": ["must be a subgroup name, got 7",
                                                 "required when the group defines "
                                                 "scheduling.subGroups: the leaf subgroup of "
                                                 "this task's pods"],
        "workflow.groups[0].scheduling.minSubGroup": [
            "minSubGroup (3) exceeds the number of direct child subgroups (2) of the PodGroup"],
        "workflow.groups[0].tasks[0].subGroup": [
            "task 'a' names subgroup 'mid', which is not a leaf (it has 1 child subgroups)"],
        "workflow.groups[0].tasks[1].subGroup": [
            "task 'b' names subgroup 'ghost', which does not exist"],
    }


def test_scheduling_shapes_and_warnings() -> None:
    spec = {"workflow": {"name": "w", "groups": [
        {"name": "h", "scheduling": [1], "tasks": [task("b")]},
        {"name": "i", "scheduling": {"subGroups": {"a": 1}}, "tasks": [task("c")]},
    ]}}
    assert errors_of(spec) == {
        "workflow.groups[0].scheduling": [
            "must be an object (minMember, minSubGroup, topologyConstraint, "
            "topologyConstraints, subGroups)"],
        "workflow.groups[1].scheduling.subGroups": ["must be a list of subgroups"],
    }
    elastic = parse_workflow_spec(yaml.safe_dump({"workflow": {"name": "w", "groups": [
        {"name": "g", "scheduling": {"minMember": 5, "topologyConstraint": {
            "requiredTopologyLevel": "rack", "preferredTopologyLevel": "zone"}},
         "tasks": [task("a", replicas=4)]}]}}))
    assert elastic.groups[0].podgroup_spec_fields() == {
        "minMember": 5, "topologyConstraint": {"preferredTopologyLevel": "zone",
                                               "requiredTopologyLevel": "rack"}}
    assert dict(elastic.warnings) == {
        "workflow.groups[0].scheduling.minMember": (
            "minMember (5) cannot be reached: the PodGroup has only 4 pods",),
        "workflow.groups[0].scheduling.topologyConstraint.preferredTopologyLevel": (
            "preferred level 'zone' is coarser than required level 'rack'; it has no effect",),
    }


def test_resource_topology_becomes_the_group_constraint() -> None:
    resources = {"default": {"gpu": 8, "topology": [
        {"key": "zone"}, {"key": "rack", "group": "r1"},
        {"key": "hostname", "requirementType": "preferred"}]}}
    workflow = parse_workflow_spec(yaml.safe_dump({"workflow": {
        "name": "w", "resources": resources,
        "groups": [group(task("a", lead=True), task("b"))]}}))
    assert workflow.groups[0].podgroup_spec_fields() == {
        "minMember": 2, "topologyConstraint": {"preferredTopologyLevel": "hostname",
                                               "requiredTopologyLevel": "rack"}}
    mixed = {"default": resources["default"], "other": {"gpu": 1}}
    assert errors_of({"workflow": {"name": "w", "resources": mixed, "groups": [
        group(task("a", lead=True), task("b", resource="other"))]}}) == {
        "workflow.groups[0]": ["the tasks' resources carry different topology requirements; a "
                               "group's tasks must share them (use the scheduling: block for "
                               "per-task placement)"]}
    assert errors_of({"workflow": {"name": "w", "resources": resources, "groups": [
        group(task("a"), scheduling={"topologyConstraint": {"requiredTopologyLevel": "zone"}})
    ]}}) == {"workflow.groups[0].scheduling.topologyConstraint": [
        "the tasks' resources already carry topology requirements; use one or the other"]}
    twice = {"default": {"topology": [{"key": "rack"}, {"key": "rack", "group": "x"}]}}
    assert errors_of({"workflow": {"name": "w", "resources": twice,
                                   "tasks": [task("a")]}}) == {
        "workflow.tasks[0]": ["a topology key appears twice in the resource's topology"]}


def test_spec_error_summary() -> None:
    error = SpecError({"a": ["x", "y"], "b": ["z"], "c": ["w"]})
    assert str(error) == "invalid workflow spec: a: x; a: y; b: z (+1 more)"
    assert error.warnings == {}


def test_a_misspelled_field_is_refused_at_every_level_with_the_nearest_name() -> None:
    spec = {"version": 2, "workflow": {
        "name": "w", "resorces": {},
        "resources": {"default": {"gpu": 1, "memroy": "1Gi"}},
        "groups": [{"name": "g", "schedulng": {},
                    "tasks": [task("a", comand=["python", "train.py"]), task("b", zzz=1)]}],
    }}
    assert errors_of(spec) == {
        "workflow.resorces": ["unknown workflow field 'resorces', did you mean 'resources'? "
                              "(known: name, labels, pool, timeout, resources, tasks, groups)"],
        "workflow.resources.default.memroy": [
            "unknown resource field 'memroy', did you mean 'memory'? (known: cpu, gpu, memory, "
            "storage, platform, topology, nodesExcluded)"],
        "workflow.groups[0].schedulng": ["unknown group field 'schedulng', did you mean "
                                         "'scheduling'? (known: name, tasks, scheduling)"],
        "workflow.groups[0].tasks[0].comand": [
            "unknown task field 'comand', did you mean 'command'? (known: name, image, command, "
            "args, lead, resource, inputs, outputs, files, environment, replicas, subGroup, "
            "credentials, exitActions)"],
        "workflow.groups[0].tasks[1].zzz": [
            "unknown task field 'zzz' (known: name, image, command, args, lead, resource, "
            "inputs, outputs, files, environment, replicas, subGroup, credentials, exitActions)"],
        "workflow.groups[0].tasks": ["exactly one task of a multi-task group must have "
                                     "lead: true (found 0: none)"],
    }
    assert errors_of({"workflow": {"name": "w", "tasks": [task("a", comand=["ls"])]}}) == {
        "workflow.tasks[0].comand": [
            "unknown task field 'comand', did you mean 'command'? (known: name, image, command, "
            "args, lead, resource, inputs, outputs, files, environment, replicas, subGroup, "
            "credentials, exitActions)"]}
    assert errors_of({"worklfow": {}, "workflow": {"name": "w", "tasks": [task("a")]}}) == {
        "worklfow": ["unknown top-level field 'worklfow', did you mean 'workflow'? (known: "
                     "version, workflow, default-values)"]}
