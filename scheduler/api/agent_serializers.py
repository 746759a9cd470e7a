"""Shapes of the agent's endpoints (`/api/configs/backend/{name}/agent/...`, see
docs/CONTRACT-CHANGES.md): bounded request bodies and their answers."""

from __future__ import annotations

from rest_framework import serializers

from osmo.serializers import RequestSerializer, StrictCharField

from ..backends.agent.live_logs import MAX_FOLLOWED
from ..backends.agent.services import MESSAGE_TYPES

MAX_MESSAGES = 500  # one batch; the agent chunks what is larger (100 pods or nodes a message)
MAX_ACKS = 1000
MAX_WAIT_SECONDS = 30


class AgentRegisterSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    k8s_uid = StrictCharField(max_length=64, help_text="UID of the cluster's kube-system "
                                                       "namespace.")
    version = StrictCharField(max_length=64, required=False, default="", allow_blank=True)


class AgentMessageSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    id = StrictCharField(max_length=64, help_text="Unique per backend: applied once.")
    type = serializers.ChoiceField(choices=MESSAGE_TYPES)
    payload = serializers.DictField(required=False, default=dict)


class AgentMessagesSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    messages = AgentMessageSerializer(many=True, max_length=MAX_MESSAGES)


class AgentAckSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    id = serializers.IntegerField(min_value=1)
    error = StrictCharField(max_length=2000, required=False, default="", allow_blank=True)


class AgentPollSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    acks = AgentAckSerializer(many=True, max_length=MAX_ACKS, required=False, default=list)
    after = serializers.IntegerField(min_value=0, required=False, default=0,
                                     help_text="The last work id this connection has seen.")
    wait = serializers.FloatField(min_value=0, max_value=MAX_WAIT_SECONDS, required=False,
                                  default=10, help_text="Seconds to wait for work.")
    following = serializers.ListField(
        child=StrictCharField(max_length=253), max_length=MAX_FOLLOWED, required=False,
        default=list, help_text="The pods whose logs the agent follows now: the poll answers "
                                "at once when the service wants another set.")


class AgentRegisteredSerializer(serializers.Serializer):
    name = serializers.CharField()
    k8s_namespace = serializers.CharField()
    placement = serializers.CharField()
    scheduler_name = serializers.CharField()
    session = serializers.DateTimeField(help_text="When this connection began: sent back "
                                                  "with every re-list of the pods.")


class AgentAckedSerializer(serializers.Serializer):
    acked = serializers.ListField(child=serializers.CharField())


class AgentWorkItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["create", "delete", "sync"])
    payload = serializers.DictField()


class AgentLogWantedSerializer(serializers.Serializer):
    task = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2,
                                 help_text="[workflow, task]")
    pod = serializers.CharField()
    since_ns = serializers.IntegerField(help_text="The stamp of the last line stored (0: "
                                                  "none yet), in ns.")


class AgentWorkSerializer(serializers.Serializer):
    work = AgentWorkItemSerializer(many=True)
    logs = AgentLogWantedSerializer(many=True, help_text="Running tasks whose logs someone "
                                                         "reads now: their new lines, please.")
