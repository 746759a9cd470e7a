"""Request serializers copy their declared fields per instance cheaply (not DRF's deep copy,
which constructs every field again): each instance still gets fields of its own, bound to it,
and validates exactly as with DRF's copies."""

from __future__ import annotations

import copy

from django.http import QueryDict

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
