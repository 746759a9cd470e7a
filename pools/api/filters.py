import django_filters

from ..models import Pool, SubpoolState


class SubpoolFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(field_name="subpool_state", choices=SubpoolState.choices,
                                        help_text="Only subpools in this state.")

    class Meta:
        model = Pool
        fields = ["state"]
