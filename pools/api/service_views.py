"""`GET /api/configs/service`: the service settings admins tune through the environment."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden

DRAIN_CHECK_SCHEDULE = "subpool-drain-check"


def drain_check_interval_seconds() -> int | None:
    """The interval beat really runs the drain sweep at (read from the same schedule beat
    loads), or None when the schedule has no drain check."""
    entry = settings.CELERY_BEAT_SCHEDULE.get(DRAIN_CHECK_SCHEDULE)
    return None if entry is None else int(entry["schedule"])


class ServiceConfigView(APIView):
    @extend_schema(responses=inline_serializer("ServiceConfig", {
        "drain_check_interval_seconds": serializers.IntegerField(allow_null=True)}),
        summary="Effective service settings (platform admins)")
    def get(self, request):
        if not roles_for(request.user).platform_admin:
            raise Forbidden("Only platform admins (osmo-admin) can read the service settings.")
        return Response({"drain_check_interval_seconds": drain_check_interval_seconds()})
