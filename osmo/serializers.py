"""Request shapes: the base class and fields of every request body and query-string serializer.

A request serializer validates types and formats (the same classes make the OpenAPI document, so
the two cannot drift); services keep the domain rules. An invalid request raises
`RequestInvalid`, which the one exception handler (osmo.errors) renders as
`{code, detail, errors}` with the contract code of the first field in error (API.md:
`invalid_quota` for quota figures, `invalid_name` for names, ...), else the serializer's own code.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from .errors import RequestInvalid

# Bounds of the database columns the validated integers are stored in.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1


class RequestSerializer(serializers.Serializer):
    # Base of request serializers: `is_valid(raise_exception=True)` raises `RequestInvalid`.
    # Declare fields in the order the contract checks them: the first field in error decides the
    # code. `field_error_codes` maps a field to its contract code; the others (and a body that is
    # not an object) get `error_code`. (Comments, not a docstring: the OpenAPI document would
    # show a docstring as every request body's description.)

    error_code = "invalid_request"
    field_error_codes: dict[str, str] = {}
    # Nested shapes the contract spells out completely (a platform) refuse unknown keys; request
    # bodies ignore them, as they always have.
    reject_unknown_fields = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for field in cls._declared_fields.values():
            _scan_surrogates_at_c_speed(field)

    def get_fields(self) -> dict:
        # DRF deep-copies the declared fields for each instance, and a field's deep copy
        # constructs it again from its arguments (most of a small request's validation time).
        return {name: _fresh(field) for name, field in self._declared_fields.items()}

    def is_valid(self, *, raise_exception: bool = False) -> bool:
        valid = super().is_valid()
        if not valid and raise_exception:
            raise RequestInvalid(self.errors, error_code=self.error_code_for(self.errors))
        return valid

    @classmethod
    def validated_query(cls, params: Mapping) -> dict:
        """The validated data of a query string (`RequestInvalid` if it is not). Most requests
        send none, and an empty one always validates to the same defaults: those are validated
        once per class (a serializer's validation is a twentieth of a submission's CPU) and
        copied."""
        if params or cls not in _EMPTY_QUERIES:
            query = cls(data=params)
            query.is_valid(raise_exception=True)
            if params:
                return query.validated_data
            _EMPTY_QUERIES[cls] = dict(query.validated_data)
        return copy.deepcopy(_EMPTY_QUERIES[cls])

    def error_code_for(self, errors: Mapping) -> str:
        first = next(iter(errors), None)
        return self.field_error_codes.get(first, self.error_code)

    def to_internal_value(self, data):
        if isinstance(data, QueryDict):
            # `?x=` (how a client sends a null) would mean "x left out" to DRF: a value that
            # says nothing is refused instead, unless the field takes an empty string.
            empty = [name for name, field in self.fields.items() if name in data
                     and data.get(name) == "" and not getattr(field, "allow_blank", False)]
            if empty:
                raise serializers.ValidationError(
                    {name: ["May not be empty: give a value, or leave the parameter out."]
                     for name in empty})
        if self.reject_unknown_fields and isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {key: ["Unknown field: expected one of "
                           f"{', '.join(sorted(self.fields))}."] for key in unknown})
        return super().to_internal_value(data)


_EMPTY_QUERIES: dict[type, dict] = {}


def _fresh(field: serializers.Field) -> serializers.Field:
    """A declared field's own copy for one serializer instance: the instance binds it (its name
    and parent) and nothing else is written to a field while it validates, so a shallow copy
    does, with a copy of a list or dict field's child whose parent is the copy. Serializers
    nested as fields keep state per instance: those are deep-copied as DRF does."""
    if isinstance(field, serializers.BaseSerializer):
        return copy.deepcopy(field)
    clone = copy.copy(field)
    child = getattr(field, "child", None)
    if child is not None:
        clone.child = _fresh(child)
        clone.child.parent = clone  # its name and source stay as the declared field bound them
    return clone


class SurrogateFreeValidator(ProhibitSurrogateCharactersValidator):
    """DRF's refusal of surrogate characters in a string field (same message and code), found by
    one regular expression search instead of a Python loop over every character (17 ms of CPU a
    megabyte against 2 ms: a spec at the body limit spent 70 ms on this check alone)."""

    SURROGATE = re.compile("[\ud800-\udfff]")

    def __call__(self, value):
        found = self.SURROGATE.search(str(value))
        if found:
            super().__call__(found.group())


def _scan_surrogates_at_c_speed(field: serializers.Field) -> None:
    """Swap a declared string field's (or a list or dict field's child's) surrogate check for
    :class:`SurrogateFreeValidator`; the copies a request validates with share it."""
    field.validators = [SurrogateFreeValidator()
                        if type(validator) is ProhibitSurrogateCharactersValidator else validator
                        for validator in field.validators]
    child = getattr(field, "child", None)
    if child is not None and not isinstance(child, serializers.BaseSerializer):
        _scan_surrogates_at_c_speed(child)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer within the bounds of an integer column (32-bit unless told otherwise).

    DRF's IntegerField also takes "10", 1.0 and true; the contract's GPU figures are integers.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", INT32_MIN)
        kwargs.setdefault("max_value", INT32_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite JSON number (DRF's FloatField also takes "1.5", true, NaN and infinity)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float) or (
                isinstance(data, float) and not math.isfinite(data)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A JSON string, kept as sent (DRF's CharField also takes numbers and trims whitespace)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON true or false (DRF's BooleanField also takes "yes", 1, "on", ...)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StringMapField(serializers.DictField):
    """An object of string values (labels, node selectors), refused as a whole when it is not."""

    default_error_messages = {"invalid": "Must be an object mapping names to string values."}

    def __init__(self, **kwargs):
        kwargs.setdefault("child", StrictCharField(allow_blank=True))
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
            self.fail("invalid")
        return super().to_internal_value(data)


class QueryIntegerField(serializers.IntegerField):
    """A query-string integer in ASCII digits (DRF's IntegerField reads '８' as 8)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return super().to_internal_value(data)


class QueryBooleanField(serializers.BooleanField):
    """A query-string flag: true/false, 1/0 or yes/no, in any case. Given empty (`?dry_run=`)
    it is refused, where DRF would take it for absent."""

    TRUE_VALUES = {"true", "1", "yes", True}
    FALSE_VALUES = {"false", "0", "no", False}  # False: what DRF reads for an absent flag

    def get_value(self, dictionary):
        if dictionary.get(self.field_name) == "":
            return ""
        return super().get_value(dictionary)


class UpperChoiceField(serializers.ChoiceField):
    """A choice given in any case (`?priority=high`), returned as the stored upper-case value."""

    def to_internal_value(self, data):
        return super().to_internal_value(data.upper() if isinstance(data, str) else data)
