"""A template is bounded in what it computes, not only in what it outputs: each way of making
a huge value or of looping for ever is refused before the work is done."""

from __future__ import annotations

import pytest

from workflows.spec import SpecError, parse_workflow_spec
from workflows.spec.limits import LimitExceeded
from workflows.spec.template_sandbox import deep_size

SPEC = "workflow:\n  name: t\n  tasks:\n  - {name: a, image: \"%s\", command: [x]}\n"


def image(expression: str, **kwargs) -> str:
    return parse_workflow_spec(SPEC % expression, **kwargs).tasks[0].image


@pytest.mark.parametrize(("expression", "refusal"), [
    ("{{ ('a' * 400000000)|length }}u", "repeats a value to more than 1048576"),
    ("{{ (9**(9**7)) % 7 }}u", "makes an integer of more than 256 bits"),
    ("{{ [0] * 1000000000 }}", "repeats a value to more than 1048576"),
    ("{{ 10**70 * 10**70 }}", "makes an integer of more than 256 bits"),
    ("{{ ([('a' * 1000)] * 10000)|length }}", "makes a value of more than 1048576"),
    ("{{ 'a'|center(1000000000) }}", "pads a value to more than 1048576"),
    ("{{ 'a'.ljust(1000000000) }}", "pads a value to more than 1048576"),
    ("{{ 'a'.zfill(1000000000) }}", "pads a value to more than 1048576"),
    ("{{ 'a'|indent(1000000000) }}", "indents text to more than 1048576"),
    ("{{ 'a\\nb'|indent('x' * 600000) }}", "indents text to more than 1048576"),
    ("{{ 'x'|wordwrap(1, wrapstring='y' * 1000000) }}", "wraps text to more than 1048576"),
    ("{{ '%1000000000d'|format(1) }}", "formats to more than 1048576 characters"),
    ("{{ '%1000000000d' % 1 }}", "formats to more than 1048576 characters"),
    ("{{ '%*d' % (1000000000, 1) }}", "formatting takes its width from an argument"),
    ("{{ '{:>1000000000}'.format(1) }}", "formats to more than 1048576 characters"),
    ("{{ '{:>{w}}'.format(1, w=1000000000) }}", "formatting takes its width from an argument"),
    ("{{ 'aaaa'|replace('a', 'b' * 1000000) }}", "replaces text to more than 1048576"),
    ("{{ ('x' * 50).join(['a' * 1000] * 1000) }}", "joins values to more than 1048576"),
    ("{{ (['a' * 1000] * 1000)|join('x' * 50) }}", "joins values to more than 1048576"),
    ("{{ ('a' * 1000000) ~ ('b' * 100000) }}", "makes a value of more than 1048576"),
    ("{{ 'a\\tb'.expandtabs(1000000000) }}", "expands tabs to more than 1048576"),
    ("{{ [1]|batch(1000000000, 0)|list }}", "asks for a linecount of more than 1048576"),
    ("{{ [1]|slice(1000000000)|list }}", "asks for a slices of more than 1048576"),
    ("{{ [[1]] * 2|sum(start=[]) }}", "sums something other than numbers"),
    ("{{ range(1000000000)|list }}", "loops over more than 10000 range() values"),
    ("{% for a in [1] * 200 %}{% for b in [1] * 200 %}{% endfor %}{% endfor %}",
     "loops or calls macros more than 10000 times"),
    ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
     "loops or calls macros more than 10000 times"),
    ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
     "{% endfor %}", "makes a value of more than 1048576"),
    ("{% set s %}{% for i in range(9000) %}{{ 'a' * 1000 }}{% endfor %}{% endset %}",
     "writes more than 4194304 characters"),
    ("{% macro m() %}{% for i in range(9000) %}" + "literal text " * 100 + "{% endfor %}"
     "{% endmacro %}{{ m()|length }}", "writes more than 4194304 characters"),
    ("{{ (1).to_bytes(1000000000, 'big') }}", "may not call int.to_bytes()"),
    ("{{ 'a'.translate({97: 'b' * 1000000}) }}", "may not call str.translate()"),
])
def test_a_template_that_would_compute_too_much_is_refused_before_it_does(expression, refusal):
    with pytest.raises(LimitExceeded) as caught:
        image(expression)
    assert caught.value.code == "template_too_large"
    [message] = caught.value.errors.pop("workflow")
    assert message.startswith(f"template {refusal}") and caught.value.errors == {}


def test_a_yaml_alias_cannot_smuggle_a_huge_value_into_a_template():
    text = ("default-values:\n  s: &s " + "x" * 5000 + "\n  many: [" + ", ".join(["*s"] * 300)
            + "]\n" + SPEC % "{{ many|length }}")
    with pytest.raises(LimitExceeded) as caught:
        parse_workflow_spec(text)
    assert "makes a value of more than 1048576" in caught.value.errors["workflow"][0]


@pytest.mark.parametrize(("expression", "error"), [
    ("{{ 1 / 0 }}", "ZeroDivisionError"),
    ("{{ 2.0 ** 100000 }}", "OverflowError"),
    ("{{ lipsum(100000) }}", "'lipsum' is undefined"),
    ("{{ 'x'|urlize }}", "No filter named 'urlize'"),
])
def test_arithmetic_errors_and_left_out_helpers_are_template_errors(expression, error):
    with pytest.raises(SpecError) as caught:
        image(expression)
    assert not isinstance(caught.value, LimitExceeded)
    assert error in caught.value.errors["workflow"][0]


def test_ordinary_templates_still_compute():
    expression = ("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                  "{% endfor %}{{ ns.n }}-{{ 3 * 4 }}-{{ 'ab' * 2 }}-{{ 2 ** 10 }}-"
                  "{{ 'x'.join(['a', 'b']) }}-{{ '%03d' % 7 }}-{{ '{:>4}'.format(1) }}-"
                  "{{ name|upper }}-{{ [1, 2]|sum }}-{{ 'a b'|replace(' ', '_') }}-"
                  "{{ 'a'|center(3) }}-{{ ['x', 'y']|join(',') }}")
    assert image(expression, set_variables=["name=img"]) == (
        "3-12-abab-1024-axb-007-   1-IMG-3-a_b- a -x,y")


def test_deep_size_counts_shared_values_in_full_and_stops_at_its_bound():
    text = "a" * 1000
    assert deep_size([text] * 3, 10_000) == 3 * 1000 + 4
    assert deep_size([text] * 10**6, 5_000) == 10**6 + 1  # past the bound: not walked
    assert deep_size({"k": [1, None, True]}, 100) == 2 + 1 + 4 + 1 + 1 + 1
