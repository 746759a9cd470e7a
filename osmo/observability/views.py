"""``GET /metrics``: Prometheus' text format, for a metrics role or an allowed address."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from osmo.errors import error_body, json_not_found

from . import access, metrics


@require_safe
def metrics_view(request):
    if not metrics.enabled():
        return json_not_found(request)
    denied = access.denial(request.META.get("REMOTE_ADDR", ""),
                           request.META.get("HTTP_AUTHORIZATION"))
    if denied:
        status, code, detail = denied
        return JsonResponse(error_body(code, detail), status=status)
    return HttpResponse(metrics.exposition(), content_type=metrics.CONTENT_TYPE)
