"""A Jinja sandbox that bounds what a template computes, not only what it outputs.

Jinja's own sandbox stops a template from reaching Python's internals, but not from making one
huge value (``'a' * 400000000``, ``9 ** (9 ** 7)``, ``'x'|center(10**9)``) or looping for ever.
Here every place where a template makes a value is checked *before* the work is done:

- every arithmetic operator (``+ - * / // % **``): sequence repetition and concatenation, the
  bits of an integer product or power, the widths of ``%`` formatting;
- every call: methods of built-in values are an allow-list, and those that grow their input
  (``center``, ``ljust``, ``zfill``, ``replace``, ``join``, ``expandtabs``, ``format``) are
  checked against the size they would make; ``range()`` is as long as the loop budget at most;
- every filter: an allow-list of Jinja's filters, the growing ones checked the same way;
- every ``~`` concatenation, loop iteration and piece of output, literal text included (the
  parsed template is rewritten so that these go through the environment too).

Each value a template makes holds at most ``max_template_value`` characters or items, counted
deeply (a list of a thousand references to one long string counts them all, as printing it
would); integers hold at most ``MAX_INT_BITS`` bits; all loops and macro calls together run at
most ``max_template_iterations`` times; all that a template writes, in a ``{% set %}`` block or
a macro as well as in its output, is at most ``max_rendered_bytes``; and the rendering thread's
CPU time is capped as a last resort. Any of these answers ``template_too_large``.
"""

from __future__ import annotations

import functools
import re
import string
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sized
from typing import Any

from jinja2 import nodes
from jinja2.filters import FILTERS
from jinja2.runtime import Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Cycler, Joiner, Namespace

from .limits import InputLimits, LimitExceeded

MAX_INT_BITS = 256  # ample for any count, size or duration; cheap to compute with

# Methods of built-in values a template may call; the ones that can grow a value have a
# check in `_GROWING_METHODS`.
_METHODS: dict[type, frozenset[str]] = {
    str: frozenset("""capitalize casefold center count endswith expandtabs find format
        format_map index isalnum isalpha isascii isdecimal isdigit isidentifier islower
        isnumeric isprintable isspace istitle isupper join ljust lower lstrip partition
        removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split
        splitlines startswith strip swapcase title upper zfill""".split()),
    list: frozenset({"count", "index", "copy"}),
    tuple: frozenset({"count", "index"}),
    dict: frozenset({"keys", "values", "items", "get", "copy"}),
    int: frozenset({"bit_length"}),
    float: frozenset({"is_integer"}),
}
# Filters that HTML templates need and a spec does not (urlize also multiplies its `target`).
_FILTERS_LEFT_OUT = frozenset({"urlize", "xmlattr", "random"})
_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]",
                     re.ASCII)
_DIGITS = re.compile(r"\d+", re.ASCII)


def deep_size(value: Any, bound: int) -> int:
    """Characters or items `value` holds, nested values counted in full (as printing it would
    show them); stops counting past `bound`, so it costs at most `bound` steps."""
    size, stack = 0, [value]
    while stack and size <= bound:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, bool) or item is None:
            size += 1
        elif isinstance(item, int):
            size += item.bit_length() // 3 + 1
        elif isinstance(item, Mapping):
            size += len(item) + 1
            if size <= bound:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            size += len(item) + 1
            if size <= bound:
                stack.extend(item)
        elif isinstance(item, Namespace):
            stack.append(item._Namespace__attrs)  # printed as its attributes
        else:
            size += 1
    return size


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """One rendering's environment (see the module docstring)."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self, limits: InputLimits, **options: Any):
        super().__init__(finalize=self._output, **options)
        self.max_value = limits.max_template_value
        self.max_iterations = limits.max_template_iterations
        self.cpu_deadline = time.thread_time() + limits.max_template_cpu_ms / 1000
        self.max_written = limits.max_rendered_bytes
        self.iterations = self.written = 0
        self.filters = {name: self._bounded_filter(name, function)
                        for name, function in FILTERS.items() if name not in _FILTERS_LEFT_OUT}
        self.globals = {"range": self._range, "dict": dict, "cycler": Cycler,
                        "joiner": Joiner, "namespace": Namespace}

    # --- the template, rewritten so that loops, `~` and output come through here ------------

    def bounded_template(self, source: str):
        tree = self.parse(source)
        for loop in list(tree.find_all(nodes.For)):
            loop.iter = self._environment_call("osmo_loop", [loop.iter], loop.lineno)
        for concat in list(tree.find_all(nodes.Concat)):
            concat.nodes = [self._environment_call("osmo_concat", concat.nodes, concat.lineno)]
        # Literal text as a call: written at run time, it passes `finalize` and is counted (a
        # constant would be written into the compiled code as it is).
        for output in list(tree.find_all(nodes.Output)):
            output.nodes = [self._environment_call("osmo_text", [nodes.Const(node.data)],
                                                   node.lineno)
                            if isinstance(node, nodes.TemplateData) else node
                            for node in output.nodes]
        tree.set_environment(self)
        return self.from_string(tree)

    @staticmethod
    def _environment_call(name: str, args: list, lineno: int) -> nodes.Call:
        call = nodes.Call(nodes.EnvironmentAttribute(name), args, [], None, None)
        return call.set_lineno(lineno)

    def osmo_loop(self, iterable: Iterable) -> Iterable:
        for item in iterable:
            self._count_iteration()
            yield item

    def osmo_concat(self, *parts: Any) -> str:
        return self.checked("".join(map(str, parts)))

    def osmo_text(self, text: str) -> str:
        return text

    def _output(self, value: Any) -> Any:
        """Every piece of output (`finalize`), also where a block or a macro captures it."""
        self._tick()
        self.written += deep_size(self.checked(value), self.max_value)
        if self.written > self.max_written:
            raise self._refuse(f"writes more than {self.max_written} characters")
        return value

    # --- the checks --------------------------------------------------------------------------

    def _refuse(self, what: str) -> LimitExceeded:
        return LimitExceeded("template_too_large", "workflow", f"template {what}")

    def _tick(self) -> None:
        if time.thread_time() > self.cpu_deadline:
            raise self._refuse("takes too long to render")

    def checked(self, value: Any) -> Any:
        """`value` if it is within bounds: no more than `max_value` characters or items."""
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_INT_BITS:
                raise self._refuse(f"makes an integer of more than {MAX_INT_BITS} bits")
        elif deep_size(value, self.max_value) > self.max_value:
            raise self._refuse(f"makes a value of more than {self.max_value} characters "
                               "or items")
        return value

    def _check_size(self, size: int, what: str) -> None:
        if size > self.max_value:
            raise self._refuse(f"{what} to more than {self.max_value} characters or items")

    def _count_iteration(self) -> None:
        self.iterations += 1
        if self.iterations > self.max_iterations:
            raise self._refuse(f"loops or calls macros more than {self.max_iterations} times")
        self._tick()

    def _check_printf(self, template: str) -> None:
        for width, precision in _PRINTF.findall(template):
            for number in (width, precision):
                if number == "*":
                    raise self._refuse("formatting takes its width from an argument")
                if number and int(number) > self.max_value:
                    raise self._refuse(f"formats to more than {self.max_value} characters")

    def _check_format(self, template: str) -> None:
        for _literal, _field, spec, _conversion in string.Formatter().parse(template):
            if spec and "{" in spec:
                raise self._refuse("formatting takes its width from an argument")
            if spec and any(int(n) > self.max_value for n in _DIGITS.findall(spec)):
                raise self._refuse(f"formats to more than {self.max_value} characters")

    # --- operators ---------------------------------------------------------------------------

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        self._tick()
        ints = all(isinstance(x, int) for x in (left, right))
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, str | list | tuple) and isinstance(times, int):
                    self._check_size(len(sequence) * times, "repeats a value")
            if ints and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                raise self._refuse(f"makes an integer of more than {MAX_INT_BITS} bits")
        elif operator == "**" and ints and right > 0 and abs(left) > 1:
            if right * (abs(left).bit_length() - 1) > MAX_INT_BITS:
                raise self._refuse(f"makes an integer of more than {MAX_INT_BITS} bits")
        elif operator == "+" and isinstance(left, str | list | tuple) and isinstance(
                right, str | list | tuple):
            self._check_size(len(left) + len(right), "joins values")
        elif operator == "%" and isinstance(left, str):
            self._check_printf(left)
        return self.checked(super().call_binop(context, operator, left, right))

    def getitem(self, obj: Any, argument: Any) -> Any:
        self._tick()
        return super().getitem(obj, argument)

    # --- calls -------------------------------------------------------------------------------

    def call(__self, __context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        __self._tick()
        if isinstance(__obj, Macro):
            __self._count_iteration()
        arguments = {k: v for k, v in kwargs.items() if k not in ("_loop_vars", "_block_vars")}
        method = getattr(__obj, "__wrapped__", __obj)  # str.format comes wrapped by the sandbox
        owner = getattr(method, "__self__", None)
        if isinstance(method, types.BuiltinMethodType) and type(owner) in _METHODS:
            if method.__name__ not in _METHODS[type(owner)]:
                raise __self._refuse(f"may not call {type(owner).__name__}."
                                     f"{method.__name__}()")
            check = _GROWING_METHODS.get(method.__name__)
            if check is not None and isinstance(owner, str):
                check(__self, owner, args, arguments)
        return __self.checked(super().call(__context, __obj, *args, **kwargs))

    def _range(self, *args: int) -> range:
        values = range(*args)
        if len(values) > self.max_iterations:  # lazy, but `|list` or `|sum` would walk it all
            raise self._refuse(f"loops over more than {self.max_iterations} range() values")
        return values

    # --- filters -----------------------------------------------------------------------------

    def _bounded_filter(self, name: str, function: Callable) -> Callable:
        passes_first = hasattr(function, "jinja_pass_arg")  # environment or context comes first
        check = _GROWING_FILTERS.get(name)

        @functools.wraps(function)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            self._tick()
            given = args[1:] if passes_first else args
            if check is not None:
                check(self, given[0], given[1:], kwargs)
            return self.checked(function(*args, **kwargs))

        return bounded


def _argument(args: tuple, kwargs: Mapping, index: int, name: str, default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _width(env: BoundedEnvironment, text: str, args: tuple, kwargs: Mapping) -> None:
    width = _argument(args, kwargs, 0, "width", 0)
    if isinstance(width, int):
        env._check_size(max(width, len(text)), "pads a value")


def _replace(env: BoundedEnvironment, text: Any, args: tuple, kwargs: Mapping) -> None:
    old, new = _argument(args, kwargs, 0, "old", ""), _argument(args, kwargs, 1, "new", "")
    count = _argument(args, kwargs, 2, "count", None)
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        found = text.count(old) if old else len(text) + 1
        if isinstance(count, int) and count >= 0:
            found = min(found, count)
        env._check_size(len(text) + found * len(new), "replaces text")


def _join_method(env: BoundedEnvironment, separator: str, args: tuple, kwargs: Mapping) -> None:
    items = _argument(args, kwargs, 0, "iterable", ())
    if isinstance(items, Sized):
        env._check_size(deep_size(items, env.max_value) + len(separator) * len(items),
                        "joins values")


def _join_filter(env: BoundedEnvironment, items: Any, args: tuple, kwargs: Mapping) -> None:
    separator = _argument(args, kwargs, 0, "d", "")
    _join_method(env, separator if isinstance(separator, str) else str(separator), (items,), {})


def _expandtabs(env: BoundedEnvironment, text: str, args: tuple, kwargs: Mapping) -> None:
    tabsize = _argument(args, kwargs, 0, "tabsize", 8)
    if isinstance(tabsize, int):
        env._check_size(len(text) + text.count("\t") * tabsize, "expands tabs")


def _format_method(env: BoundedEnvironment, template: str, args: tuple, kwargs: Mapping) -> None:
    env._check_format(template)


def _format_filter(env: BoundedEnvironment, template: Any, args: tuple, kwargs: Mapping) -> None:
    if isinstance(template, str):
        env._check_printf(template)


def _indent(env: BoundedEnvironment, text: Any, args: tuple, kwargs: Mapping) -> None:
    width = _argument(args, kwargs, 0, "width", 4)
    prefix = width if isinstance(width, int) else len(str(width))
    if isinstance(text, str):
        env._check_size(len(text) + (text.count("\n") + 1) * prefix, "indents text")


def _wordwrap(env: BoundedEnvironment, text: Any, args: tuple, kwargs: Mapping) -> None:
    width = _argument(args, kwargs, 0, "width", 79)
    wrap = _argument(args, kwargs, 2, "wrapstring", None) or "\n"
    if isinstance(text, str) and isinstance(width, int):
        env._check_size(len(text) + (len(text) // max(width, 1) + 1) * len(str(wrap)),
                        "wraps text")


def _count(index: int, name: str) -> Callable:
    def check(env: BoundedEnvironment, value: Any, args: tuple, kwargs: Mapping) -> None:
        count = _argument(args, kwargs, index, name, 0)
        if isinstance(count, int) and count > env.max_value:
            raise env._refuse(f"asks for a {name} of more than {env.max_value}")
    return check


def _sum(env: BoundedEnvironment, value: Any, args: tuple, kwargs: Mapping) -> None:
    start = _argument(args, kwargs, 1, "start", 0)
    if not isinstance(start, int | float):  # adding up lists copies them again and again
        raise env._refuse("sums something other than numbers")


_GROWING_METHODS: dict[str, Callable] = {
    "center": _width, "ljust": _width, "rjust": _width, "zfill": _width,
    "replace": _replace, "join": _join_method, "expandtabs": _expandtabs,
    "format": _format_method, "format_map": _format_method,
}
_GROWING_FILTERS: dict[str, Callable] = {
    "center": _width, "indent": _indent, "replace": _replace, "join": _join_filter,
    "format": _format_filter, "wordwrap": _wordwrap, "batch": _count(0, "linecount"),
    "slice": _count(0, "slices"), "sum": _sum, "truncate": _count(0, "length"),
}
