"""Shapes of `/api/configs/backend` (API.md "Backends"): request bodies (they validate) and the
Backend object, built as a plain dict and described for the OpenAPI document."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from osmo.config_changes import ConfigChangeSerializer
from osmo.serializers import (
    QueryBooleanField,
    RequestSerializer,
    StrictBooleanField,
    StrictCharField,
)
from scheduler.core.kai_names import DNS_LABEL_PATTERN

from ..backends.liveness import MAINTENANCE, OFFLINE, ONLINE, backend_status, is_online
from ..backends.selectors import BackendFigures
from ..models import Backend, BackendKind, BackendPlacement


class SchedulerSettingsSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_backend"

    scheduler_name = StrictCharField(max_length=253, help_text="Pods' `schedulerName`.")


class BackendUpsertSerializer(RequestSerializer):
    """Body of `POST /api/configs/backend/{name}`: creating needs `kind`; on an update every
    field is optional and an absent one keeps its value."""

    reject_unknown_fields = True
    error_code = "invalid_backend"

    kind = serializers.ChoiceField(choices=BackendKind.choices, required=False)
    placement = serializers.ChoiceField(choices=BackendPlacement.choices, required=False)
    k8s_namespace = serializers.RegexField(
        DNS_LABEL_PATTERN, required=False, max_length=63,
        error_messages={"invalid": "Must be a DNS label (≤ 63 characters)."})
    description = StrictCharField(required=False, allow_blank=True, max_length=4096)
    scheduler_settings = SchedulerSettingsSerializer(required=False)

    def validate(self, attrs: dict) -> dict:
        scheduler_settings = attrs.pop("scheduler_settings", None)
        if scheduler_settings:
            attrs["scheduler_name"] = scheduler_settings["scheduler_name"]
        return attrs


class BackendChangeSerializer(ConfigChangeSerializer):
    """OSMO's body (`osmo config update BACKEND NAME`): `configs` holds the fields of
    BackendUpsertSerializer, `description` and `tags` are the revision's."""

    error_code = "invalid_backend"

    configs = serializers.DictField(help_text="The fields of the contract's body.")


class BackendPatchSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_backend"

    maintenance = StrictBooleanField(help_text="true: nothing new is dispatched there, placed "
                                               "work stays; false lifts it.")


class BackendDeleteQuerySerializer(RequestSerializer):
    force = QueryBooleanField(required=False, default=False,
                              help_text="Delete even while pools name it: they forget it.")


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def backend_object(backend: Backend, figures: BackendFigures, *, now=None) -> dict:
    now = now or timezone.now()
    lease = settings.OSMO_BACKEND_LEASE
    return {
        "name": backend.name,
        "kind": backend.kind,
        "placement": backend.placement,
        "description": backend.description,
        "k8s_namespace": backend.k8s_namespace,
        "k8s_uid": backend.k8s_uid,
        "version": backend.version,
        "scheduler_settings": {"scheduler_name": backend.scheduler_name},
        "status": backend_status(kind=backend.kind, maintenance=backend.maintenance,
                                 last_heartbeat=backend.last_heartbeat, now=now,
                                 lease_seconds=lease),
        "online": is_online(kind=backend.kind, last_heartbeat=backend.last_heartbeat, now=now,
                            lease_seconds=lease),
        "last_heartbeat": _iso(backend.last_heartbeat),
        "created_date": _iso(backend.created_date),
        "nodes": figures.nodes,
        "gpus": figures.gpus,
        "gpus_free": figures.gpus_free,
        "pools": figures.pools,
    }


# --- response shapes for the OpenAPI document ------------------------------------------------

class SchedulerSettingsOutSerializer(serializers.Serializer):
    scheduler_name = serializers.CharField()


class BackendSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=BackendKind.values)
    placement = serializers.ChoiceField(choices=BackendPlacement.values)
    description = serializers.CharField()
    k8s_namespace = serializers.CharField()
    k8s_uid = serializers.CharField(allow_null=True)
    version = serializers.CharField()
    scheduler_settings = SchedulerSettingsOutSerializer()
    status = serializers.ChoiceField(choices=[ONLINE, OFFLINE, MAINTENANCE])
    online = serializers.BooleanField(help_text="Reachable, maintenance aside.")
    last_heartbeat = serializers.DateTimeField(allow_null=True)
    created_date = serializers.DateTimeField()
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    gpus_free = serializers.IntegerField()
    pools = serializers.ListField(child=serializers.CharField(),
                                 help_text="Live top-level pools naming it.")


class BackendListSerializer(serializers.Serializer):
    backends = BackendSerializer(many=True)
