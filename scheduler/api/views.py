"""KAI object endpoints (API.md "KAI objects"): shape and permissions only.

- ``GET /api/kai/queues``: platform admins see the whole hierarchy; anyone else sees the root
  and the queues of the pools they can view (their subpools included), so pool names and
  quotas of other tenants do not leak. ``?format=yaml`` (or ``Accept: application/yaml``)
  renders a multi-document YAML stream.
- ``GET /api/workflow/{name}/kai``: a workflow's PodGroup and Pod manifests, for whoever can
  see the workflow.
- ``GET /api/podgroups/{name}``: one PodGroup (a workflow group's or a workload's) with its
  gang status and pods, for whoever can see its workflow.
- ``POST /api/kai/podgroups/validate``: the webhook rules on a PodGroup manifest, or on
  ``{"podgroup": manifest, "pods": [pod, ...]}`` to check the pods' subgroup labels too.
- ``POST /webhooks/podgroups/validate``: a Kubernetes validating admission webhook
  (``admission.k8s.io/v1``). No token: the API server calls it (protect it with TLS and a
  network policy). Objects that are not PodGroups, and DELETE/CONNECT operations, are allowed
  unchecked: the webhook configuration decides what is sent here, and an unrelated object must
  never be blocked by us.
"""

from __future__ import annotations

import yaml
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import renderers, serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import OsmoError
from osmo.limits import input_limits
from scheduler import selectors as scheduler_selectors
from scheduler.backends.spec import default_spec
from scheduler.core.podgroup_validation import (
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    subgroup_count,
    validate_podgroup,
)
from scheduler.kai import selectors
from scheduler.kai.selectors import StoredTopologies
from workflows.api import serializers as workflow_serializers
from workflows.selectors import workflow_get

from . import serializers as s


class YAMLRenderer(renderers.BaseRenderer):
    """A list becomes a multi-document YAML stream; anything else one document."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None:
            return b""
        if isinstance(data, list):
            text = yaml.safe_dump_all(data, sort_keys=False, explicit_start=True)
        else:
            text = yaml.safe_dump(data, sort_keys=False)
        return text.encode("utf-8")


# --- OpenAPI shapes --------------------------------------------------------------------------

class KaiIssueSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Field path, e.g. spec.subGroups[2].minSubGroup.")
    message = serializers.CharField()


class QueueManifestSerializer(serializers.Serializer):
    apiVersion = serializers.CharField()  # noqa: N815 - the Kubernetes field name
    kind = serializers.CharField()
    metadata = serializers.DictField()
    spec = serializers.DictField()


class PodGroupValidationSerializer(serializers.Serializer):
    allowed = serializers.BooleanField()
    errors = KaiIssueSerializer(many=True)
    warnings = KaiIssueSerializer(many=True)


class AdmissionStatusSerializer(serializers.Serializer):
    code = serializers.IntegerField(required=False, help_text="403 when denied.")
    message = serializers.CharField()


class AdmissionResponseSerializer(serializers.Serializer):
    uid = serializers.CharField()
    allowed = serializers.BooleanField()
    status = AdmissionStatusSerializer()
    warnings = serializers.ListField(child=serializers.CharField(), required=False)


class AdmissionReviewSerializer(serializers.Serializer):
    apiVersion = serializers.CharField()  # noqa: N815 - the Kubernetes field name
    kind = serializers.CharField()
    response = AdmissionResponseSerializer()


# --- views -----------------------------------------------------------------------------------

class KaiQueuesView(APIView):
    renderer_classes = [renderers.JSONRenderer, YAMLRenderer]

    @extend_schema(
        summary="The KAI Queue hierarchy (scheduling.run.ai/v2) of a namespace",
        parameters=[
            s.KaiQueuesQuerySerializer,
            OpenApiParameter("format", str, enum=["json", "yaml"],
                             description="yaml: a multi-document YAML stream."),
        ],
        responses={(200, "application/json"): OpenApiResponse(
                       response=QueueManifestSerializer(many=True),
                       description="A JSON array of Queue manifests, parents first."),
                   (200, "application/yaml"): OpenApiResponse(
                       response=OpenApiTypes.STR,
                       description="The same manifests as YAML documents.")},
    )
    def get(self, request):
        query = s.KaiQueuesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        namespace = query.validated_data.get("namespace") or default_spec().namespace
        roles = roles_for(request.user)
        return Response(selectors.queue_manifests(namespace=namespace, roles=roles))


class WorkflowKaiView(APIView):
    @extend_schema(responses=workflow_serializers.DryRunSerializer,
                   summary="The PodGroup and Pod manifests of a workflow's groups")
    def get(self, request, name: str):
        workflow = workflow_get(name=name, roles=roles_for(request.user), user=request.user)
        return Response({"workflow": workflow_serializers.workflow_object(workflow,
                                                                           request=request),
                         "manifests": scheduler_selectors.kai_manifests(workflow)})


class PodGroupDetailView(APIView):
    @extend_schema(
        responses=inline_serializer("PodGroupDetail", {
            "manifest": serializers.DictField(help_text="The PodGroup manifest."),
            "status": inline_serializer("PodGroupStatus", {
                "phase": serializers.ChoiceField(
                    choices=["Pending", "Running", "Succeeded", "Failed"]),
                "ready": serializers.BooleanField(
                    help_text="The gang's minimum is bound to nodes, by the scheduler's rule "
                              "(minMember per leaf, minSubGroup whole children)."),
                "bound_pods": serializers.IntegerField(),
                "min_member": serializers.IntegerField(
                    help_text="The fewest pods that make the gang ready."),
                "reasons": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Why it is not scheduled (as `GET .../explain`)."),
            }),
            "pods": inline_serializer("PodGroupPod", {
                "name": serializers.CharField(),
                "subgroup": serializers.CharField(allow_null=True),
                "node": serializers.CharField(allow_null=True),
                "phase": serializers.ChoiceField(
                    choices=["Pending", "Running", "Succeeded", "Failed"]),
            }, many=True),
            "workflow": serializers.CharField(),
            "group": serializers.CharField(),
        }),
        summary="One PodGroup: its manifest, gang status and pods")
    def get(self, request, name: str):
        return Response(scheduler_selectors.podgroup_detail(
            name=name, roles=roles_for(request.user), user=request.user))


class PodGroupValidateView(APIView):
    @extend_schema(
        summary="Check a PodGroup against the webhook rules",
        description="Body: a PodGroup manifest, or {\"podgroup\": manifest, \"pods\": [...]} "
                    "to check the pods' subgroup labels as well.",
        request=s.PodGroupCheckSerializer,
        responses=PodGroupValidationSerializer,
    )
    def post(self, request):
        body = s.PodGroupCheckSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        limits = input_limits()
        count = subgroup_count(body.validated_data["podgroup"])
        if count > limits.max_subgroups:
            raise OsmoError("too_many_subgroups", f"The PodGroup lists {count} subGroups; at "
                            f"most {limits.max_subgroups}.",
                            errors={"podgroup.spec.subGroups": [
                                f"At most {limits.max_subgroups} subgroups."]})
        pods = body.validated_data.get("pods")
        if pods is not None and len(pods) > limits.max_pods:
            raise OsmoError("too_many_pods", f"{len(pods)} pods; at most {limits.max_pods}.",
                            errors={"pods": [f"At most {limits.max_pods} pods."]})
        return Response(validate_podgroup(body.validated_data["podgroup"],
                                          body.validated_data.get("pods"),
                                          topologies=StoredTopologies()).as_dict())


def _issue_text(issue) -> str:
    return f"{issue.path}: {issue.message}" if issue.path else issue.message


def admission_response(review: dict) -> dict:
    """The AdmissionReview answer to ``review`` (already checked to carry a request uid)."""
    request = review["request"]
    uid = request["uid"]
    kind = request.get("kind") or {}
    obj = request.get("object")
    is_podgroup = (kind.get("kind") == PODGROUP_KIND
                   and f"{kind.get('group')}/{kind.get('version')}" == PODGROUP_API_VERSION) \
        or (isinstance(obj, dict) and obj.get("kind") == PODGROUP_KIND
            and obj.get("apiVersion") == PODGROUP_API_VERSION)
    operation = request.get("operation", "CREATE")
    response: dict = {"uid": uid}
    if not is_podgroup or operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        response.update(allowed=True, status={"message": "not checked: not a PodGroup "
                                                         "create or update"})
    elif (count := subgroup_count(obj)) > input_limits().max_subgroups:
        response.update(allowed=False, status={
            "code": 403, "message": f"PodGroup lists {count} subGroups; at most "
                                    f"{input_limits().max_subgroups}"})
    else:
        result = validate_podgroup(obj, topologies=StoredTopologies())
        name = (obj.get("metadata") or {}).get("name") or "(unnamed)"
        if result.allowed:
            response.update(allowed=True, status={"message": f"PodGroup {name} is valid"})
        else:
            details = "; ".join(_issue_text(issue) for issue in result.errors)
            response.update(allowed=False, status={
                "code": 403, "message": f"PodGroup {name} is invalid: {details}"})
        if result.warnings:
            response["warnings"] = [_issue_text(issue) for issue in result.warnings]
    return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}


class PodGroupAdmissionWebhookView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Validating admission webhook for PodGroups (Kubernetes AdmissionReview)",
        description="No token: the Kubernetes API server calls it. Protect it with TLS and a "
                    "network policy in production.",
        request=s.AdmissionReviewInputSerializer,
        responses=AdmissionReviewSerializer,
        auth=[],
    )
    def post(self, request):
        review = s.AdmissionReviewInputSerializer(data=request.data)
        review.is_valid(raise_exception=True)
        return Response(admission_response(review.validated_data))
