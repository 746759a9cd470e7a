"""Server-side rendering of templated OSMO specs, as OSMO does before parsing.

A templated spec carries a top-level ``default-values:`` block and Jinja ``{{ }}`` / ``{% %}``
markup, so it is not YAML until rendered. Steps:

1. Cut the ``default-values:`` block out of the text (it is plain YAML) and load it.
2. Overlay ``set_variables`` (``k=v``; ``v`` read as a YAML scalar, so ``n=8`` is the int 8)
   and then ``set_string_variables`` (``v`` kept as the string given).
3. Mask OSMO's run-time tokens — ``{{output}}``, ``{{input:0}}``, ``{{input:task}}``,
   ``{{host:task}}``, ``{{workflow_id}}``, ``{{output:...}}`` — so Jinja never sees them
   (``{{input:0}}`` is not even valid Jinja); they are restored verbatim after rendering and
   resolved at run time. Setting a variable named like a token is ignored (OSMO does the same).
   Shell's ``${#var}`` is masked too: Jinja would read ``{#`` as the start of a comment.
4. Render in a sandbox that also bounds what the template computes
   (:mod:`workflows.spec.template_sandbox`: no attribute access to internals, no file system
   loader, no value, loop or CPU time beyond its limits), keeping the trailing newline.

Undefined variables (decision; OSMO's CLI refuses them, but the brief asks that train.yaml's
``{{ storage_url }}`` still parse): they render as the empty string, and their names are
reported in ``RenderResult.undefined_variables`` → ``WorkflowSpec.undefined_variables`` so the
API can warn. Leaving them in place was rejected: ``url: {{ storage_url }}/x`` would then no
longer be valid YAML (a plain scalar cannot start with ``{``).

A spec is treated as a template when, after masking run-time tokens, it still contains ``{{``
or ``{%``, or it has a top-level ``default-values:`` key, or variables were passed. Plain specs
are never run through Jinja, so shell text like ``${#array[@]}`` in them is safe.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from jinja2 import TemplateError, Undefined

from workflows.spec.errors import SpecError
from workflows.spec.limits import DEFAULT_LIMITS, InputLimits, LimitExceeded, load_yaml
from workflows.spec.template_sandbox import BoundedEnvironment

RUNTIME_TOKEN = re.compile(
    r"\{\{\s*(?:output|workflow_id|(?:input|host|output):[^{}\s]+)\s*\}\}"
)
# Shell length expansion ``${#var}`` would open a Jinja comment; it is masked the same way.
_SHELL_LENGTH = re.compile(r"\$\{#")
_PROTECTED = re.compile(f"{RUNTIME_TOKEN.pattern}|{_SHELL_LENGTH.pattern}")
RUNTIME_TOKEN_NAMES = frozenset({"output", "workflow_id", "input", "host"})
_DEFAULTS_HEADER = re.compile(r"^default-values\s*:\s*(#.*)?$")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MASK = "@@osmo-runtime-token-{}@@"


@dataclass(frozen=True)
class RenderResult:
    text: str
    """The rendered spec text (the ``default-values:`` block removed)."""
    templated: bool
    undefined_variables: tuple[str, ...] = ()
    values: dict[str, Any] | None = None


def split_default_values(text: str) -> tuple[str, str | None]:
    """Return (text without the top-level ``default-values:`` block, that block or None)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _DEFAULTS_HEADER.match(line.rstrip())),
                 None)
    if start is None:
        return text, None
    end = start + 1
    while end < len(lines):
        line = lines[end]
        stripped = line.strip()
        if stripped and not line[0].isspace() and not stripped.startswith("#"):
            break
        end += 1
    block = "".join(lines[start:end])
    return "".join(lines[:start] + lines[end:]), block


def _parse_assignments(
    items: Sequence[str], field: str, as_yaml: bool, errors: dict[str, list[str]]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if isinstance(items, str):
        errors.setdefault(field, []).append("must be a list of 'name=value' strings")
        return values
    for index, item in enumerate(items or ()):
        path = f"{field}[{index}]"
        if not isinstance(item, str) or "=" not in item:
            errors.setdefault(path, []).append(f"expected 'name=value', got {item!r}")
            continue
        name, raw = item.split("=", 1)
        name = name.strip()
        if not _VARIABLE_NAME.match(name):
            errors.setdefault(path, []).append(f"'{name}' is not a valid variable name")
            continue
        if name in RUNTIME_TOKEN_NAMES:
            continue  # run-time tokens cannot be overridden; OSMO ignores such settings
        if as_yaml:
            try:
                value = load_yaml(raw, path=path) if raw.strip() else ""
            except yaml.YAMLError:
                value = raw
            if isinstance(value, dict | list):
                value = raw  # only scalars: a value like "[a" or "{x}" stays text
            values[name] = "" if value is None else value
        else:
            values[name] = raw
    return values


def is_templated(text: str, has_variables: bool = False) -> bool:
    masked = RUNTIME_TOKEN.sub("", text)
    if has_variables or "{{" in masked or "{%" in masked:
        return True
    return any(_DEFAULTS_HEADER.match(line.rstrip()) for line in text.splitlines())


def render_template(
    text: str,
    set_variables: Sequence[str] = (),
    set_string_variables: Sequence[str] = (),
    limits: InputLimits = DEFAULT_LIMITS,
) -> RenderResult:
    """Render a templated spec; a plain spec comes back unchanged (``templated=False``).
    What the template may compute is bounded as :mod:`workflows.spec.template_sandbox` says,
    and the output stops at ``limits.max_rendered_bytes``."""
    has_variables = bool(set_variables) or bool(set_string_variables)
    if not is_templated(text, has_variables):
        return RenderResult(text=text, templated=False)

    errors: dict[str, list[str]] = {}
    body, block = split_default_values(text)
    values: dict[str, Any] = {}
    if block is not None:
        try:
            loaded = load_yaml(block, limits, path="default-values") or {}
        except yaml.YAMLError as exc:
            raise SpecError({"default-values": [f"not valid YAML: {exc}"]}) from exc
        defaults = loaded.get("default-values") if isinstance(loaded, dict) else None
        if defaults is None:
            defaults = {}
        if not isinstance(defaults, dict):
            raise SpecError({"default-values": ["must be a mapping of variable names to values"]})
        values.update({str(k): v for k, v in defaults.items()
                       if str(k) not in RUNTIME_TOKEN_NAMES})
    values.update(_parse_assignments(set_variables, "set_variables", True, errors))
    values.update(_parse_assignments(set_string_variables, "set_string_variables", False, errors))
    if errors:
        raise SpecError(errors)

    tokens: list[str] = []

    def mask(match: re.Match[str]) -> str:
        tokens.append(match.group(0))
        return _MASK.format(len(tokens) - 1)

    masked = _PROTECTED.sub(mask, body)
    undefined: list[str] = []

    class RecordingUndefined(Undefined):
        """Renders empty and remembers which variable was missing."""

        def __str__(self) -> str:
            if self._undefined_name and self._undefined_name not in undefined:
                undefined.append(self._undefined_name)
            return ""

    environment = BoundedEnvironment(limits, undefined=RecordingUndefined,
                                     keep_trailing_newline=True, autoescape=False)
    try:
        for value in values.values():  # a YAML alias can repeat one long text many times
            environment.checked(value)
        rendered = _render_bounded(environment.bounded_template(masked), values,
                                   limits.max_rendered_bytes)
    except SpecError:
        raise
    except TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise SpecError({"workflow": [f"template error{where}: {exc}"]}) from exc
    except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
        raise SpecError({"workflow": [f"template error: {type(exc).__name__}: {exc}"]}) from exc
    for index, token in enumerate(tokens):
        rendered = rendered.replace(_MASK.format(index), token)
    return RenderResult(
        text=rendered,
        templated=True,
        undefined_variables=tuple(undefined),
        values=values,
    )


def _render_bounded(template, values: dict[str, Any], max_bytes: int) -> str:
    """Render, stopping as soon as the output passes ``max_bytes`` (streamed, not built)."""
    parts, size = [], 0
    for chunk in template.generate(**values):
        size += len(chunk)
        if size > max_bytes:
            raise LimitExceeded("template_too_large", "workflow",
                                f"the rendered spec is larger than {max_bytes} bytes")
        parts.append(chunk)
    return "".join(parts)
