"""`GET /api/health` and `GET /api/version` (no auth); `GET /api/whoami` lists pools, so it is
`pools.api.profile_views`."""

from __future__ import annotations

import re
from importlib import metadata

from django.conf import settings
from django.db import connection
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from . import ports


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # noqa: BLE001 - any failure means "down"
        connection.close_if_unusable_or_obsolete()
        return False


def cluster_ok() -> bool:
    try:
        return ports.cluster().cluster_ok()
    except Exception:  # noqa: BLE001
        return False


def placement_missing() -> list[dict[str, str]]:
    try:
        return ports.cluster().placement_missing()
    except Exception:  # noqa: BLE001 - the database's part already says why
        connection.close_if_unusable_or_obsolete()
        return []


def broker_ok() -> bool:
    import redis

    try:
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1,
                                      socket_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001
        return False


def backends_health() -> dict[str, dict]:
    """Each backend's {status, online, heartbeat_age}; empty when they cannot be read."""
    try:
        return ports.backends().backends_health()
    except Exception:  # noqa: BLE001 - the database's part already says why
        connection.close_if_unusable_or_obsolete()
        return {}


class PlacementMissingSerializer(serializers.Serializer):
    requirement = serializers.ChoiceField(choices=["crd", "priorityclass", "scheduler"])
    detail = serializers.CharField()


class PlacementHealthSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    missing = PlacementMissingSerializer(many=True)


class BackendPlacementSerializer(serializers.Serializer):
    ok = serializers.BooleanField(
        allow_null=True, help_text="Null until its leader or agent has reported.")
    missing = PlacementMissingSerializer(many=True)


class BackendHealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ONLINE", "OFFLINE", "MAINTENANCE"])
    online = serializers.BooleanField()
    heartbeat_age = serializers.FloatField(
        allow_null=True, help_text="Seconds since its last heartbeat; null without one (an "
                                   "embedded backend needs none).")
    placement = BackendPlacementSerializer(
        help_text="Whether its cluster has what its placement needs (KAI: its CRDs, the "
                  "PriorityClasses, a scheduler that acts).")


class HealthView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses=inline_serializer("Health", {
        "status": serializers.CharField(), "database": serializers.CharField(),
        "broker": serializers.CharField(),
        "backends": serializers.DictField(
            child=BackendHealthSerializer(),
            help_text="Per backend, by name. A backend OFFLINE does not make the service "
                      "degraded (its work waits)."),
        "placement": PlacementHealthSerializer(
            required=False,
            help_text="Kubernetes backend only: whether the cluster has what KAI placement "
                      "needs (its CRDs, the PriorityClasses, a scheduler that acts). Missing "
                      "parts do not make the service degraded: work queues and `explain` "
                      "says why it waits.")}),
        summary="Liveness of the service and its parts")
    def get(self, request):
        parts = {"database": "ok" if database_ok() else "down",
                 "broker": "ok" if broker_ok() else "down"}
        if ports.cluster().cluster_reported():  # the leader's last API contact
            parts["cluster"] = "ok" if parts["database"] == "ok" and cluster_ok() else "down"
        healthy = all(v == "ok" for v in parts.values())
        backends = backends_health() if parts["database"] == "ok" else {}
        body = {"status": "ok" if healthy else "degraded", **parts, "backends": backends}
        if "cluster" in parts and parts["database"] == "ok":
            missing = placement_missing()
            body["placement"] = {"ok": not missing, "missing": missing}
        return Response(body, status=200 if healthy else 503)


def service_version() -> dict:
    """This service's version as the OSMO client reads it: {major, minor, revision, hash}
    (strings); `hash` is the build's commit from OSMO_BUILD_HASH, else empty."""
    try:
        version = metadata.version("osmo-platform")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        version = "0.0.0"
    numbers = [int(part) for part in re.findall(r"\d+", version)[:3]]
    numbers += [0] * (3 - len(numbers))
    return {"major": str(numbers[0]), "minor": str(numbers[1]), "revision": str(numbers[2]),
            "hash": settings.OSMO_BUILD_HASH}


class VersionView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses=inline_serializer("ServiceVersion", {
        "major": serializers.CharField(), "minor": serializers.CharField(),
        "revision": serializers.CharField(), "hash": serializers.CharField()}),
        summary="The service's version")
    def get(self, request):
        return Response(service_version())
