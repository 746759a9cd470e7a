import django_filters

from ..models import Workflow, WorkflowStatus


class WorkflowFilter(django_filters.FilterSet):
    pool = django_filters.CharFilter(field_name="pool__name", help_text="Canonical pool name.")
    status = django_filters.MultipleChoiceFilter(choices=WorkflowStatus.choices)
    user = django_filters.CharFilter(field_name="user__username")

    class Meta:
        model = Workflow
        fields = ["pool", "status", "user"]
