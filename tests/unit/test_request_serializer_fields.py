"""Request serializers copy their declared fields per instance cheaply (not DRF's deep copy,
which constructs every field again): each instance still gets fields of its own, bound to it,
and validates exactly as with DRF's copies. Their string fields refuse surrogate characters as
DRF does, found by a regular expression."""

from __future__ import annotations

import copy

import pytest
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from osmo.serializers import RequestSerializer, SurrogateFreeValidator
from workflows.api.serializers import SubmitQuerySerializer, SubmitSerializer


def _as_drf(cls):
    """The same serializer with DRF's own per-instance copy of the declared fields."""
    return type(cls.__name__, (cls,), {
        "get_fields": lambda self: copy.deepcopy(self._declared_fields)})


def test_each_instance_has_its_own_fields_bound_to_it() -> None:
    first, second = SubmitQuerySerializer(data={}), SubmitQuerySerializer(data={})
    for name, declared in SubmitQuerySerializer._declared_fields.items():
        mine, theirs = first.fields[name], second.fields[name]
        assert mine is not declared and mine is not theirs
        assert mine.parent is first and theirs.parent is second and mine.field_name == name
        assert getattr(declared, "parent", None) is None  # the declared field stays unbound
    label = first.fields["label"]
    assert label.child is not second.fields["label"].child
    assert label.child.parent is label and label.child.root is first


def test_validation_is_drfs() -> None:
    queries = ["", "priority=low&label=a=b&label=team=x&dry_run=true", "priority=nope",
               "label=no-equals&validation_only=maybe", "label=" + "k" * 70 + "=v"]
    for query in queries:
        ours, drfs = (cls(data=QueryDict(query)) for cls in (SubmitQuerySerializer,
                                                            _as_drf(SubmitQuerySerializer)))
        assert ours.is_valid() == drfs.is_valid(), query
        assert ours.errors == drfs.errors and (ours.errors or
                                               ours.validated_data == drfs.validated_data)
    bodies = [{"file": "workflow: {}"}, {"file": " "}, {"file": 3},
              {"file": "x", "set_variables": ["a=1", 2]}, {"file": "x", "set_variables": None}, []]
    for body in bodies:
        ours, drfs = (cls(data=body) for cls in (SubmitSerializer, _as_drf(SubmitSerializer)))
        assert ours.is_valid() == drfs.is_valid(), body
        assert ours.errors == drfs.errors and (ours.errors or
                                               ours.validated_data == drfs.validated_data)


def _all_request_serializers(cls=RequestSerializer):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_request_serializers(sub)


def test_a_surrogate_is_refused_as_drf_refuses_it() -> None:
    text = "workflow:\n  name: bench\n  tasks: [{name: a\ud83d, image: x}]\n"
    ours = SubmitSerializer(data={"file": text})
    assert not ours.is_valid()
    with pytest.raises(ValidationError) as refused:
        serializers.CharField().run_validation(text)  # DRF's own field and check
    assert ours.errors["file"] == refused.value.detail
    assert ours.errors["file"][0].code == "surrogate_characters_not_allowed"
    assert SubmitSerializer(data={"file": text.replace("\ud83d", "é")}).is_valid()


def test_no_request_field_loops_over_its_characters_in_python() -> None:
    # DRF's check walks every character in Python (17 ms of CPU a megabyte).
    import osmo.urls  # noqa: F401 - every app's serializers imported

    checked = 0
    for cls in _all_request_serializers():
        for field in cls._declared_fields.values():
            for each in (field, getattr(field, "child", None)):
                kinds = {type(v) for v in getattr(each, "validators", [])}
                assert ProhibitSurrogateCharactersValidator not in kinds, (cls, field)
                checked += SurrogateFreeValidator in kinds
    assert checked >= 4
