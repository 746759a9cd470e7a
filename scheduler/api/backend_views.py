"""`/api/configs/backend` (API.md "Backends"): shape and permissions only; writes go to
`scheduler/backends/services.py`."""

from __future__ import annotations

from contextlib import nullcontext

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo import config_history
from osmo.accounts.roles import roles_for
from osmo.config_changes import is_osmo_change
from osmo.errors import Forbidden

from ..backends import selectors, services
from . import backend_serializers as s


def _platform_admin(request) -> None:
    if not roles_for(request.user).platform_admin:
        raise Forbidden("Only platform admins (osmo-admin) manage backends.")


def _body(name: str) -> dict:
    [(backend, figures)] = selectors.backends_with_figures([name])
    return s.backend_object(backend, figures)


class BackendListView(APIView):
    @extend_schema(responses=s.BackendListSerializer, summary="Every backend",
                   operation_id="api_configs_backend_list")
    def get(self, request):
        return Response({"backends": [s.backend_object(b, f)
                                      for b, f in selectors.backends_with_figures()]})


class BackendDetailView(APIView):
    @extend_schema(responses=s.BackendSerializer, summary="One backend")
    def get(self, request, name: str):
        return Response(_body(selectors.backend_get(name).name))

    @extend_schema(request=s.BackendUpsertSerializer,
                   responses={201: s.BackendSerializer, 200: s.BackendSerializer},
                   summary="Create or update a backend")
    def post(self, request, name: str):
        _platform_admin(request)
        services.validate_name(name)  # the path's name is refused before the body's fields
        note = None
        data = request.data
        if is_osmo_change(data, "configs"):  # OSMO's client: {configs, description, tags}
            change = s.BackendChangeSerializer(data=data)
            change.is_valid(raise_exception=True)
            note, data = change.note(), change.validated_data["configs"]
        body = s.BackendUpsertSerializer(data=data)
        body.is_valid(raise_exception=True)
        with config_history.noted(note) if note else nullcontext():
            backend, created = services.backend_upsert(actor=request.user, name=name,
                                                       **body.validated_data)
        return Response(_body(backend.name), status=201 if created else 200)

    @extend_schema(request=s.BackendPatchSerializer, responses=s.BackendSerializer,
                   summary="Put a backend under maintenance, or lift it")
    def patch(self, request, name: str):
        _platform_admin(request)
        backend = selectors.backend_get(name)
        body = s.BackendPatchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.backend_set_maintenance(actor=request.user, backend=backend,
                                         maintenance=body.validated_data["maintenance"])
        return Response(_body(name))

    @extend_schema(responses={204: None}, parameters=[s.BackendDeleteQuerySerializer],
                   summary="Delete a backend (409 backend_in_use while a pool names it or "
                           "tasks are bound on its nodes, unless force)")
    def delete(self, request, name: str):
        _platform_admin(request)
        backend = selectors.backend_get(name)
        query = s.BackendDeleteQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        services.backend_delete(actor=request.user, backend=backend,
                                force=query.validated_data["force"])
        return Response(status=204)
