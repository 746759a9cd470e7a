"""All ten OSMO examples parse, with the GPU figures of the examples README."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmo.cli.localfiles import inline_local_files
from tests.shared_data import osmo_examples
from workflows.spec import SpecError, parse_workflow_spec

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = osmo_examples(module=True)
POOL_PLATFORMS = ["ovx-l40", "dgx-h100"]
GiB = 2**30

# file → (workflow name, [(group, GPUs, task names)], total GPUs)
EXPECTED = {
    "hello_world.yaml": ("hello-osmo", [("hello-group", 0, ["hello"])], 0),
    "resources_basic.yaml": ("resource-demo", [("my-task-group", 0, ["my-task"])], 0),
    "resources_multiple.yaml": ("mixed-resources", [("light-task-group", 0, ["light-task"]),
                                                    ("gpu-task-group", 1, ["gpu-task"])], 1),
    "resources_platforms.yaml": ("platform-demo", [("cpu-task-group", 0, ["cpu-task"]),
                                                   ("gpu-task-group", 1, ["gpu-task"])], 1),
    "parallel_tasks.yaml": ("parallel-tasks", [("task-a-group", 0, ["task-a"]),
                                               ("task-b-group", 0, ["task-b"]),
                                               ("task-c-group", 0, ["task-c"])], 0),
    "group_tasks.yaml": ("grouped-workflow",
                         [("parallel-processing", 0, ["processor-1", "processor-2",
                                                      "processor-3"])], 0),
    "combination_workflow_simple.yaml": ("data-pipeline",
                                         [("prepare-data", 0, ["generate-data",
                                                               "validate-data"]),
                                          ("train-models", 0, ["train-model-a",
                                                               "train-model-b"])], 0),
    "template_hello_world.yaml": ("hello-osmo", [("hello-group", 0, ["hello"])], 0),
    "verify-gpu.yaml": ("verify-gpu", [("nvidia-smi-group", 1, ["nvidia-smi"])], 1),
    "train.yaml": ("train-multi-gpu", [("training", 16, ["master", "worker"])], 16),
}


def read_as_submitted(name: str) -> str:
    """The text the CLI submits: train.yaml's localpath file is inlined."""
    text = (EXAMPLES / name).read_text()
    return inline_local_files(text, lambda path: f"# {path}\nprint('training')\n")


def test_all_ten_examples_are_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_parses_with_readme_gpu_figures(name: str) -> None:
    workflow = parse_workflow_spec(read_as_submitted(name), platforms=POOL_PLATFORMS,
                                   default_platform="ovx-l40")
    spec_name, groups, total = EXPECTED[name]
    assert workflow.name == spec_name
    assert [(g.name, g.gpus, [t.name for t in g.tasks]) for g in workflow.groups] == groups
    assert workflow.total_gpus == total
    assert workflow.max_group_gpus == max(g[1] for g in groups)
    assert workflow.version == 2
    for group in workflow.groups:
        assert group.podgroup_spec_fields() == {"minMember": len(group.tasks)}


def test_example_details() -> None:
    hello = parse_workflow_spec(read_as_submitted("hello_world.yaml"))
    task = hello.tasks[0]
    assert (task.image, task.command, task.args, task.lead) == (
        "ubuntu:24.04", ("echo",), ("Hello from OSMO!",), True)
    assert (task.resource.cpu_millicores, task.resource.memory_bytes,
            task.resource.storage_bytes, task.resource.gpus) == (1000, GiB, GiB, 0)

    basic = parse_workflow_spec(read_as_submitted("resources_basic.yaml")).tasks[0].resource
    assert (basic.cpu_millicores, basic.memory_bytes, basic.storage_bytes) == (
        2000, 4 * GiB, 10 * GiB)

    multiple = parse_workflow_spec(read_as_submitted("resources_multiple.yaml"))
    assert [t.resource.name for t in multiple.tasks] == ["default", "gpu_resource"]
    assert multiple.resources["gpu_resource"].memory_bytes == 32 * GiB

    parallel = parse_workflow_spec(read_as_submitted("parallel_tasks.yaml"),
                                   default_platform="ovx-l40")
    assert parallel.resources == {}
    assert {(t.resource.cpu_millicores, t.resource.memory_bytes, t.platform)
            for t in parallel.tasks} == {(None, None, "ovx-l40")}
    assert [g.depends_on for g in parallel.groups] == [(), (), ()]

    grouped = parse_workflow_spec(read_as_submitted("group_tasks.yaml")).groups[0]
    assert grouped.lead == "processor-1"
    assert [t.lead for t in grouped.tasks] == [True, False, False]

    gpu = parse_workflow_spec(read_as_submitted("verify-gpu.yaml"))
    assert (gpu.exec_timeout_seconds, gpu.queue_timeout_seconds) == (600, 600)


def test_platforms_resolved_from_resources() -> None:
    workflow = parse_workflow_spec(read_as_submitted("resources_platforms.yaml"),
                                   platforms=POOL_PLATFORMS)
    assert [t.platform for t in workflow.tasks] == ["ovx-l40", "dgx-h100"]
    # Without the pool's platform list the check is skipped (offline linting).
    assert parse_workflow_spec(read_as_submitted("resources_platforms.yaml")).total_gpus == 1
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(read_as_submitted("resources_platforms.yaml"),
                            platforms=["ovx-l40"])
    assert caught.value.errors == {"workflow.resources.x86_gpu.platform": [
        "unknown platform 'dgx-h100' (the pool's platforms: ovx-l40)"]}


def test_combination_dependencies_and_runtime_tokens() -> None:
    workflow = parse_workflow_spec(read_as_submitted("combination_workflow_simple.yaml"))
    prepare, train = workflow.groups
    assert prepare.depends_on == ()
    assert train.depends_on == ("prepare-data",)
    assert train.tasks[0].depends_on == ("generate-data",)
    assert dict(train.tasks[0].inputs[0]) == {"task": "generate-data"}
    assert "mkdir -p {{output}}/data" in prepare.tasks[0].args[0]
    assert "cat {{input:0}}/data/training_data.csv" in train.tasks[0].args[0]
    assert workflow.rendered_text == (EXAMPLES / "combination_workflow_simple.yaml").read_text()


def test_train_yaml_as_submitted() -> None:
    workflow = parse_workflow_spec(read_as_submitted("train.yaml"))
    master, worker = workflow.tasks
    assert workflow.undefined_variables == ("storage_url",)
    assert dict(master.outputs[0]) == {"url": "/my-trained-model/{{workflow_id}}/"}
    assert "--master_addr {{host:master}}" in master.files[0].contents
    assert master.files[1] == type(master.files[1])(
        path="/tmp/train.py", contents="# train.py\nprint('training')\n", localpath="train.py")
    assert (master.gpus, worker.gpus, master.resource.cpu_millicores) == (8, 8, 16000)
    passed = parse_workflow_spec(read_as_submitted("train.yaml"),
                                 set_variables=["storage_url=s3://my-bucket/osmo-data"])
    assert passed.undefined_variables == ()
    assert dict(passed.tasks[0].outputs[0]) == {
        "url": "s3://my-bucket/osmo-data/my-trained-model/{{workflow_id}}/"}


def test_train_yaml_without_inlining_is_rejected() -> None:
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec((EXAMPLES / "train.yaml").read_text())
    message = ("local file 'train.py' must arrive inlined as contents: (the CLI inlines "
               "localpath files before submitting)")
    assert caught.value.errors == {
        "workflow.groups[0].tasks[0].files[1].localpath": [message],
        "workflow.groups[0].tasks[1].files[1].localpath": [message],
    }


def test_bytes_and_mapping_input() -> None:
    text = read_as_submitted("hello_world.yaml")
    assert parse_workflow_spec(text.encode()).name == "hello-osmo"
    mapping = parse_workflow_spec({"workflow": {"name": "m", "tasks": [
        {"name": "t", "image": "busybox"}]}})
    assert (mapping.name, mapping.rendered_text, mapping.groups[0].name) == ("m", None, "t-group")
