import re

import django_filters
from django import forms
from django.db.models import Subquery
from django.db.models.fields.json import KT
from rest_framework.exceptions import ValidationError

from pools.models import Pool

from ..models import Priority, Workflow, WorkflowStatus

# Statuses the OSMO client may ask for that this service never gives a workflow: accepted, they
# match nothing.
OSMO_ONLY_STATUSES = ("WAITING", "FAILED_SERVER_ERROR", "FAILED_BACKEND_ERROR",
                      "FAILED_IMAGE_PULL", "FAILED_START_ERROR", "FAILED_START_TIMEOUT")
ALL_STATUSES = [*WorkflowStatus.choices, *((s, s) for s in OSMO_ONLY_STATUSES)]


class MultipleValueField(forms.MultipleChoiceField):
    """Any strings, repeated (`?users=a&users=b`)."""

    def valid_value(self, value):
        return True


class ValuesFilter(django_filters.MultipleChoiceFilter):
    """A repeated parameter of free values, any of which matches. The fields filtered are
    one row per workflow or task (no DISTINCT, which would sort the whole history)."""

    field_class = MultipleValueField

    def __init__(self, *args, distinct: bool = False, **kwargs):
        super().__init__(*args, distinct=distinct, **kwargs)


def selector_regex(selector: str) -> str:
    """A label selector value as the OSMO client writes it — a literal, `*` wildcards and
    `(a|b)` alternatives — as an anchored regular expression."""
    out = []
    for char in selector:
        if char == "*":
            out.append(".*")
        elif char in "(|)":
            out.append(char)
        else:
            out.append(re.escape(char))
    return "^" + "".join(out) + "$"


class WorkflowFilter(django_filters.FilterSet):
    pool = django_filters.CharFilter(method="filter_pool", help_text="Canonical pool name.")
    status = django_filters.MultipleChoiceFilter(choices=WorkflowStatus.choices, distinct=False)
    user = django_filters.CharFilter(field_name="user__username")
    # The OSMO client's parameters (docs/API-OSMO-CLIENT.md).
    pools = ValuesFilter(
        method="filter_pools",
        help_text="Canonical pool names (repeat the parameter).")
    statuses = django_filters.MultipleChoiceFilter(
        field_name="status", choices=ALL_STATUSES, distinct=False,
        help_text="Statuses (repeat the parameter); OSMO's other status names match nothing.")
    users = ValuesFilter(
        field_name="user__username",
        help_text="Submitters' usernames (repeat the parameter).")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains",
                                     help_text="Workflows whose name contains this.")
    priority = django_filters.MultipleChoiceFilter(choices=Priority.choices, distinct=False)
    all_users = django_filters.BooleanFilter(
        method="filter_all_users",
        help_text="Accepted for the OSMO client: every visible workflow is listed anyway.")
    all_pools = django_filters.BooleanFilter(
        method="filter_all_users",
        help_text="Accepted for the OSMO client: no `pools` means every visible pool.")
    label = ValuesFilter(
        method="filter_labels",
        help_text="KEY=SELECTOR (repeat: all must match); SELECTOR is a value, `*` wildcards "
                  "or `(a|b)` alternatives.")
    no_label = ValuesFilter(method="filter_no_labels",
                            help_text="Label keys the workflow must not have.")
    submitted_after = django_filters.IsoDateTimeFilter(
        field_name="submitted_at", lookup_expr="gte",
        help_text="Submitted at or after (ISO 8601; naive means UTC).")
    submitted_before = django_filters.IsoDateTimeFilter(
        field_name="submitted_at", lookup_expr="lt",
        help_text="Submitted before (ISO 8601; naive means UTC).")
    order = django_filters.ChoiceFilter(
        method="filter_order", choices=[("ASC", "ASC"), ("DESC", "DESC")],
        help_text="By submission time; default DESC (newest first).")

    class Meta:
        model = Workflow
        fields = ["pool", "status", "user"]

    def is_valid(self) -> bool:
        """django-filter takes `?user=` for no filter at all: a parameter given empty asks for
        something, so it is refused instead."""
        valid = super().is_valid()
        empty = [name for name in self.filters if "" in self.data.getlist(name)]
        for name in empty:
            self.form.add_error(name, "May not be empty: leave the parameter out instead.")
        return valid and not empty

    def filter_pool(self, queryset, name, value: str):
        # The pool's id as a value (not a join on its name), so the (pool, status,
        # submitted_at) index gives the page in order.
        return queryset.filter(pool_id=Subquery(Pool.objects.filter(name=value).values("pk")))

    def filter_pools(self, queryset, name, value: str):
        if not value:
            return queryset
        return queryset.filter(pool_id__in=Pool.objects.filter(name__in=value).values("pk"))

    def filter_all_users(self, queryset, name, value):
        return queryset

    def filter_labels(self, queryset, name, value: str):
        for index, item in enumerate(value or ()):
            key, separator, selector = item.partition("=")
            if not separator or not key:
                raise ValidationError({"label": [f"'{item}' is not KEY=SELECTOR."]})
            if not any(char in selector for char in "*(|)"):
                queryset = queryset.filter(labels__contains={key: selector})
                continue
            pattern = selector_regex(selector)
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValidationError({"label": [f"'{item}': {error}."]}) from error
            alias = f"label_value_{index}"
            queryset = queryset.alias(**{alias: KT(f"labels__{key}")}).filter(
                **{f"{alias}__regex": pattern})
        return queryset

    def filter_no_labels(self, queryset, name, value: str):
        for key in value or ():
            queryset = queryset.exclude(labels__has_key=key)
        return queryset

    def filter_order(self, queryset, name, value):
        if value == "ASC":
            return queryset.order_by("submitted_at", "id")
        return queryset.order_by("-submitted_at", "-id")
