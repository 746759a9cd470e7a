"""`/api/configs/history`, `/api/configs/diff`, `/api/configs/history/rollback`: OSMO's config
history for POOL and BACKEND, for platform admins. Shape and permissions only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo import config_history
from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, OsmoError

from ..configs import selectors, services
from . import config_serializers as s


def _platform_admin(request) -> None:
    if not roles_for(request.user).platform_admin:
        raise Forbidden("Only platform admins (osmo-admin) read and roll back config history.")


class ConfigHistoryView(APIView):
    @extend_schema(responses=s.HistorySerializer, parameters=[s.HistoryQuerySerializer],
                   summary="Revisions of the POOL and BACKEND configs")
    def get(self, request):
        _platform_admin(request)
        query = s.HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        omit = query.validated_data["omit_data"]
        rows = selectors.revisions(query.query())
        return Response({"configs": [
            s.revision_object(row, None if omit
                              else selectors.config_at(row["config_type"], row["revision"]))
            for row in rows]})


class ConfigDiffView(APIView):
    @extend_schema(responses=s.DiffSerializer, parameters=[s.DiffQuerySerializer],
                   summary="A config type's whole config at two revisions, and what differs")
    def get(self, request):
        _platform_admin(request)
        query = s.DiffQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        config_type = query.validated_data["config_type"]
        first, second = (query.validated_data["first_revision"],
                         query.validated_data["second_revision"])
        for revision in (first, second):
            selectors.revision_get(config_type, revision)
        first_data = selectors.config_at(config_type, first)
        second_data = selectors.config_at(config_type, second)
        return Response({"first_data": first_data, "second_data": second_data,
                         "diff": selectors.config_diff(config_type, first_data, second_data)})


class ConfigRollbackView(APIView):
    @extend_schema(request=s.RollbackSerializer, responses=s.HistorySerializer,
                   summary="Roll a revision's pool, subpool or backend back to the config it "
                           "recorded")
    def post(self, request):
        _platform_admin(request)
        body = s.RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        written = services.config_rollback(
            actor=request.user, config_type=data["config_type"], revision=data["revision"],
            description=data.get("description", ""), tags=tuple(data["tags"]))
        rows = [row for config_type, revision in written
                for row in selectors.revisions(selectors.HistoryQuery(
                    config_types=(config_type,), revision=revision, limit=1))]
        return Response({"configs": [s.revision_object(row) for row in rows]})


class ConfigRevisionTagsView(APIView):
    @extend_schema(request=s.TagsSerializer, responses=s.RevisionSerializer,
                   summary="Add tags to a revision, or take them away")
    def post(self, request, config_type: str, revision: int):
        _platform_admin(request)
        kind = config_type.upper()
        if kind not in config_history.CONFIG_TYPES:
            raise OsmoError("invalid_request", f"Config history is kept for "
                                               f"{' and '.join(config_history.CONFIG_TYPES)} "
                                               f"here, not {config_type[:40]!r}.")
        body = s.TagsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.config_tag(config_type=kind, revision=revision,
                            add=body.validated_data["set_tags"],
                            remove=body.validated_data["delete_tags"])
        [row] = selectors.revisions(selectors.HistoryQuery(config_types=(kind,),
                                                           revision=revision, limit=1))
        return Response(s.revision_object(row))
