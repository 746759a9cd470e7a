"""Server-side template rendering: default-values, --set variables, run-time tokens."""

from __future__ import annotations

import pytest

from tests.shared_data import osmo_examples
from workflows.spec import SpecError, parse_workflow_spec, render_template
from workflows.spec.templating import is_templated, split_default_values

EXAMPLES = osmo_examples(module=True)
TEMPLATE = (EXAMPLES / "template_hello_world.yaml").read_text()


def test_defaults_apply_without_variables() -> None:
    workflow = parse_workflow_spec(TEMPLATE)
    task = workflow.tasks[0]
    assert (workflow.name, task.image, task.args) == (
        "hello-osmo", "ubuntu:22.04", ("Hello from OSMO!",))
    assert workflow.undefined_variables == ()
    assert "default-values" not in workflow.rendered_text


def test_set_variables_override_defaults() -> None:
    workflow = parse_workflow_spec(
        TEMPLATE,
        set_variables=["workflow_name=greetings", "ubuntu_version=24.04"],
        set_string_variables=["message=Custom message!"],
    )
    task = workflow.tasks[0]
    assert (workflow.name, task.image, task.args) == (
        "greetings", "ubuntu:24.04", ("Custom message!",))


def test_yaml_scalars_versus_strings() -> None:
    # set_variables values are YAML scalars: 22.10 is the float 22.1; set_string keeps text.
    as_yaml = parse_workflow_spec(TEMPLATE, set_variables=["ubuntu_version=22.10"])
    as_text = parse_workflow_spec(TEMPLATE, set_string_variables=["ubuntu_version=22.10"])
    assert as_yaml.tasks[0].image == "ubuntu:22.1"
    assert as_text.tasks[0].image == "ubuntu:22.10"
    # the string variant wins when both name the same variable
    both = parse_workflow_spec(TEMPLATE, set_variables=["ubuntu_version=1"],
                               set_string_variables=["ubuntu_version=20.04"])
    assert both.tasks[0].image == "ubuntu:20.04"


def test_loops_use_typed_variables_and_tokens_survive() -> None:
    spec = """\
workflow:
  name: {{ name }}
  groups:
  - name: train
    tasks:
    {% for i in range(count) %}
    - name: worker-{{ i }}
      image: pytorch
      {% if i == 0 %}lead: true{% endif %}
      args: ["--master={{host:worker-0}}", "--out={{output}}", "--in={{ input:0 }}",
             "--id={{workflow_id}}", "--shell=${#arr[@]}"]
    {% endfor %}
default-values:
  name: loop
  count: 2
"""
    workflow = parse_workflow_spec(spec, set_variables=["count=3"])
    assert [t.name for t in workflow.tasks] == ["worker-0", "worker-1", "worker-2"]
    assert workflow.groups[0].lead == "worker-0"
    assert workflow.tasks[1].args == ("--master={{host:worker-0}}", "--out={{output}}",
                                      "--in={{ input:0 }}", "--id={{workflow_id}}",
                                      "--shell=${#arr[@]}")


def test_runtime_token_variables_are_ignored() -> None:
    spec = "workflow:\n  name: t\n  tasks:\n  - {name: a, image: x, args: ['{{output}}']}\n"
    workflow = parse_workflow_spec(spec, set_variables=["output=/tmp/hijack"])
    assert workflow.tasks[0].args == ("{{output}}",)


def test_undefined_variables_render_empty_and_are_reported() -> None:
    spec = "workflow:\n  name: t{{ suffix }}\n  tasks:\n  - {name: a, image: '{{ img }}x'}\n"
    workflow = parse_workflow_spec(spec)
    assert (workflow.name, workflow.tasks[0].image) == ("t", "x")
    assert workflow.undefined_variables == ("suffix", "img")


def test_plain_specs_skip_jinja() -> None:
    text = "workflow:\n  name: p\n  tasks:\n  - {name: a, image: x, args: ['${#a[@]} {#']}\n"
    assert not is_templated(text)
    assert render_template(text).templated is False
    assert parse_workflow_spec(text).tasks[0].args == ("${#a[@]} {#",)
    assert is_templated(text, has_variables=True)


def test_split_default_values_keeps_the_rest() -> None:
    body, block = split_default_values("a: 1\ndefault-values:\n  x: 1\n\n  # c\nb: 2\n")
    assert (body, block) == ("a: 1\nb: 2\n", "default-values:\n  x: 1\n\n  # c\n")
    assert split_default_values("a: 1\n") == ("a: 1\n", None)


def test_sandbox_blocks_internals() -> None:
    spec = "workflow:\n  name: \"{{ ''.__class__.__mro__ }}\"\n  tasks: []\n"
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(spec)
    assert list(caught.value.errors) == ["workflow"]
    assert caught.value.errors["workflow"][0].startswith("template error")


@pytest.mark.parametrize(
    ("kwargs", "errors"),
    [
        ({"set_variables": ["novalue"]}, {"set_variables[0]": ["expected 'name=value', got "
                                                               "'novalue'"]}),
        ({"set_string_variables": ["1x=2"]}, {"set_string_variables[0]": [
            "'1x' is not a valid variable name"]}),
        ({"set_variables": "a=1"}, {"set_variables": ["must be a list of 'name=value' "
                                                      "strings"]}),
    ],
)
def test_variable_errors(kwargs: dict, errors: dict) -> None:
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec(TEMPLATE, **kwargs)
    assert caught.value.errors == errors


def test_template_and_defaults_errors() -> None:
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec("workflow:\n  name: {% if %}\n")
    assert caught.value.errors["workflow"][0].startswith("template error (line 2)")
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec("workflow: {}\ndefault-values:\n  - a\n")
    assert caught.value.errors == {"default-values": [
        "must be a mapping of variable names to values"]}
    with pytest.raises(SpecError) as caught:
        parse_workflow_spec("workflow: {}\ndefault-values:\n  a: [\n")
    assert list(caught.value.errors) == ["default-values"]


def test_non_scalar_variable_values_stay_text() -> None:
    spec = "workflow:\n  name: t\n  tasks:\n  - {name: a, image: x, args: ['{{ v }}']}\n"
    assert parse_workflow_spec(spec, set_variables=["v=[1, 2]"]).tasks[0].args == ("[1, 2]",)
    assert parse_workflow_spec(spec, set_variables=["v="]).tasks[0].args == ("",)
