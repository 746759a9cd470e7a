"""Shapes of the cluster, scheduler and KAI endpoints: request serializers (they validate) and
response shapes for the OpenAPI document."""

from __future__ import annotations

import re
from collections.abc import Mapping

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from osmo.serializers import (
    INT64_MAX,
    QueryBooleanField,
    RequestSerializer,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StringMapField,
)
from scheduler.core.kai_names import DEFAULT_BACKEND
from workflows.spec.units import parse_bytes, parse_millicores

NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
ADMISSION_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


@extend_schema_field({"oneOf": [{"type": "number"}, {"type": "string"}]})
class QuantityField(serializers.Field):
    """A Kubernetes quantity (a number, or a string like "512Gi" or "500m") → an integer of the
    unit `parse` returns (bytes, millicores), within a bigint column."""

    default_error_messages = {"invalid": "{message}",
                              "max_value": "Ensure this value is at most {max_value}."}

    def __init__(self, *, parse, **kwargs):
        self.parse = parse
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> int:
        try:
            value = self.parse(data)
        except (ValueError, TypeError) as error:
            self.fail("invalid", message=str(error))
        if value > INT64_MAX:
            self.fail("max_value", max_value=INT64_MAX)
        return value

    def to_representation(self, value):
        return value


# --- cluster nodes ---------------------------------------------------------------------------

class NodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    gpus = serializers.IntegerField()
    gpus_free = serializers.IntegerField()
    cpu = serializers.FloatField(help_text="cores")
    memory = serializers.CharField(help_text="a Kubernetes quantity, e.g. 512Gi")
    labels = serializers.DictField(child=serializers.CharField())
    schedulable = serializers.BooleanField()
    backend = serializers.CharField(help_text="The backend the node belongs to.")


class NodeListQuerySerializer(RequestSerializer):
    backend = StrictCharField(required=False, max_length=63,
                              help_text="Only the nodes of this backend.")


class SchedulerStatusQuerySerializer(RequestSerializer):
    backend = StrictCharField(required=False, max_length=63, default=DEFAULT_BACKEND,
                              help_text="The backend whose last cycle (default `default`).")


class NodeInSerializer(RequestSerializer):
    name = StrictCharField(validators=[RegexValidator(
        NODE_NAME, "name must be a DNS subdomain (lowercase letters, digits, '-', '.').")])
    gpus = StrictIntegerField(min_value=0)
    cpu = QuantityField(parse=parse_millicores, source="cpu_millis", default=0,
                        help_text="cores (a number) or a quantity such as 500m")
    memory = QuantityField(parse=parse_bytes, source="memory_bytes", default=0,
                           help_text="bytes, or a Kubernetes quantity such as 512Gi")
    labels = StringMapField(default=dict)
    backend = StrictCharField(required=False, max_length=63, default=DEFAULT_BACKEND,
                              help_text="An embedded backend (default `default`).")


class NodePatchSerializer(RequestSerializer):
    schedulable = StrictBooleanField(help_text="false cordons (bound work stays), true "
                                               "uncordons.")


class NodeDeleteQuerySerializer(RequestSerializer):
    force = QueryBooleanField(required=False, default=False,
                              help_text="Evict bound pods (their tasks end FAILED_EVICTED).")


# --- topology --------------------------------------------------------------------------------

class TopologyLevelSerializer(RequestSerializer):
    alias = StrictCharField(required=False, allow_blank=True)
    nodeLabel = StrictCharField()  # noqa: N815 - the KAI field name


class TopologySerializer(RequestSerializer):
    # Every shape error is the contract's invalid_topology, like the service's level rules
    # (unique aliases and labels, kubernetes.io/hostname only last).
    error_code = "invalid_topology"

    name = serializers.CharField(read_only=True)
    levels = serializers.ListField(child=TopologyLevelSerializer(), min_length=1, max_length=16,
                                   help_text="Coarsest first.")


# --- KAI objects -----------------------------------------------------------------------------

class KaiQueuesQuerySerializer(RequestSerializer):
    namespace = serializers.RegexField(
        DNS_LABEL, required=False, allow_blank=True, trim_whitespace=False,
        error_messages={"invalid": "Must be a DNS label (≤ 63 characters)."},
        help_text="Default: OSMO_NAMESPACE.")


class PodGroupCheckSerializer(RequestSerializer):
    """A PodGroup manifest with the Pods to check against it; the manifest alone (a body with
    `apiVersion`) is also accepted."""

    # Any JSON: what is not a PodGroup is reported by the webhook rules (200, allowed: false).
    podgroup = serializers.JSONField(allow_null=True,
                                     help_text="A scheduling.run.ai/v2alpha2 PodGroup.")
    pods = serializers.ListField(child=serializers.DictField(), required=False, allow_null=True,
                                 help_text="Pods whose subgroup labels are checked too.")

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and not data:
            raise serializers.ValidationError({"podgroup": [
                "The body is empty: send a PodGroup manifest, or {podgroup, pods}."]})
        if isinstance(data, Mapping) and ("podgroup" not in data or "apiVersion" in data):
            return {"podgroup": dict(data), "pods": None}
        return super().to_internal_value(data)


class AdmissionRequestInputSerializer(RequestSerializer):
    uid = StrictCharField()
    kind = serializers.DictField(required=False, allow_null=True,
                                 help_text="{group, version, kind} of the object.")
    operation = StrictCharField(required=False, allow_null=True, default="CREATE")
    object = serializers.JSONField(required=False, allow_null=True)


class AdmissionReviewInputSerializer(RequestSerializer):
    apiVersion = serializers.ChoiceField(choices=ADMISSION_API_VERSIONS)  # noqa: N815
    kind = serializers.ChoiceField(choices=["AdmissionReview"])
    request = AdmissionRequestInputSerializer()
