"""Shapes of the agent's endpoints (`/api/configs/backend/{name}/agent/...`, see
docs/CONTRACT-CHANGES.md): bounded request bodies and their answers."""

from __future__ import annotations

import re

from rest_framework import serializers

from osmo.serializers import (
    RequestSerializer,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from workflows.models import Workflow

from ..backends.agent.live_logs import MAX_FOLLOWED
from ..backends.agent.services import MESSAGE_TYPES
from ..cycle_figures import MAX_CYCLE_PENDING
from ..cycle_tally import (
    MAX_PHASE_SECONDS,
    MAX_TALLY_FIRST_BOUND,
    MAX_TALLY_PHASES,
    MAX_TALLY_REASONS,
    REASON_PATTERN,
)

MAX_MESSAGES = 500  # one batch; the agent chunks what is larger (100 pods or nodes a message)
MAX_ACKS = 1000
MAX_WAIT_SECONDS = 30


class AgentRegisterSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    k8s_uid = StrictCharField(max_length=64, help_text="UID of the cluster's kube-system "
                                                       "namespace.")
    version = StrictCharField(max_length=64, required=False, default="", allow_blank=True)
    instance = StrictCharField(max_length=64, required=False, default="", allow_blank=True,
                               help_text="This agent process's identity: only the backend's "
                                         "leader is heard (409 agent_not_leader).")


class CycleQueueSerializer(RequestSerializer):
    reject_unknown_fields = True

    name = StrictCharField(max_length=253)
    parent = StrictCharField(max_length=253, allow_null=True)
    deserved_gpus = serializers.IntegerField()
    fair_share_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField(min_value=0)
    allocated_non_preemptible_gpus = serializers.IntegerField(min_value=0)
    requested_gpus = serializers.IntegerField(min_value=0)
    reserved_gpus = serializers.IntegerField(min_value=0, required=False, default=0)


class CyclePendingGangSerializer(RequestSerializer):
    reject_unknown_fields = True

    podgroup = StrictCharField(max_length=253)
    workflow = StrictCharField(max_length=253, allow_blank=True)
    group = StrictCharField(max_length=253, allow_blank=True)
    queue = StrictCharField(max_length=253, allow_blank=True)
    reasons = serializers.ListField(child=serializers.DictField(), max_length=50)
    estimate = serializers.DictField(allow_null=True, required=False, default=None)


class CycleTallySerializer(RequestSerializer):
    """What the agent's cycles since its last acked ``cycle`` add to the scheduler's metrics
    (``scheduler/cycle_tally.py``): bounded, since each reason becomes a label value."""

    reject_unknown_fields = True

    cycles = StrictIntegerField(min_value=1)
    phases = serializers.ListField(
        child=serializers.ListField(
            child=StrictFloatField(min_value=0, max_value=MAX_PHASE_SECONDS),
            min_length=3, max_length=3),
        max_length=MAX_TALLY_PHASES,
        help_text="[snapshot, decide, apply] seconds of the latest cycles.")
    bound = StrictIntegerField(min_value=0)
    evicted = serializers.DictField(child=StrictIntegerField(min_value=0),
                                    help_text="Pods evicted by reason.")
    moved = StrictIntegerField(min_value=0)
    first_bound = serializers.ListField(
        child=StrictCharField(max_length=Workflow._meta.get_field("name").max_length),
        max_length=MAX_TALLY_FIRST_BOUND,
        help_text="The workflows whose first pod a cycle bound.")

    def validate_evicted(self, evicted: dict) -> dict:
        if len(evicted) > MAX_TALLY_REASONS:
            raise serializers.ValidationError(f"At most {MAX_TALLY_REASONS} reasons.")
        if not all(re.fullmatch(REASON_PATTERN, reason) for reason in evicted):
            raise serializers.ValidationError("A reason is a word: lowercase letters and _, "
                                              "at most 32.")
        return evicted

    def validate(self, attrs: dict) -> dict:
        if len(attrs["phases"]) > attrs["cycles"]:
            raise serializers.ValidationError({"phases": ["More phase times than cycles."]})
        return attrs


class AgentCycleSerializer(RequestSerializer):
    """A scheduling cycle our placement ran in the agent (the ``cycle`` message's payload)."""

    reject_unknown_fields = True

    at = serializers.FloatField(min_value=0, help_text="When it began (epoch seconds).")
    duration_ms = serializers.FloatField(min_value=0)
    bound = serializers.IntegerField(min_value=0)
    evicted = serializers.IntegerField(min_value=0)
    queues = CycleQueueSerializer(many=True, max_length=10_000)
    pending_gangs = CyclePendingGangSerializer(many=True, max_length=MAX_CYCLE_PENDING)
    metrics = serializers.DictField()
    tally = CycleTallySerializer(required=False, help_text="Absent from an older agent.")


class AgentMessageSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    id = StrictCharField(max_length=64, help_text="Unique per backend: applied once.")
    type = serializers.ChoiceField(choices=MESSAGE_TYPES)
    payload = serializers.DictField(required=False, default=dict)

    def validate(self, attrs: dict) -> dict:
        if attrs["type"] == "cycle":  # a record the service keeps: its shape checked here
            cycle = AgentCycleSerializer(data=attrs["payload"])
            if not cycle.is_valid():
                raise serializers.ValidationError({"payload": cycle.errors})
            attrs["payload"] = cycle.validated_data
        return attrs


class AgentMessagesSerializer(RequestSerializer):
    reject_unknown_fields = True
    error_code = "invalid_request"

    messages = AgentMessageSerializer(many=True, max_length=MAX_MESSAGES)
    instance = StrictCharField(max_length=64, required=False, default="", allow_blank=True,
                               help_text="This agent process's identity: only the backend's "
                                         "leader is heard (409 agent_not_leader).")


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
    usage = serializers.BooleanField(required=False, default=False,
                                     help_text="The answer carries the queues' historical "
                                               "usage (the agent's scheduler weighs it).")
    instance = StrictCharField(max_length=64, required=False, default="", allow_blank=True,
                               help_text="This agent process's identity: only the backend's "
                                         "leader is heard (409 agent_not_leader).")


class AgentSchedulerSerializer(serializers.Serializer):
    scheduler_name = serializers.CharField(help_text="The schedulerName of the pods it places.")
    interval = serializers.FloatField(help_text="Seconds at most between two cycles.")
    reserve_after_seconds = serializers.FloatField()
    max_reservations = serializers.IntegerField()
    usage_k_value = serializers.FloatField()


class AgentRegisteredSerializer(serializers.Serializer):
    name = serializers.CharField()
    k8s_namespace = serializers.CharField()
    placement = serializers.CharField()
    scheduler_name = serializers.CharField()
    session = serializers.DateTimeField(help_text="When this connection began: sent back "
                                                  "with every re-list of the pods.")
    lease_seconds = serializers.IntegerField(help_text="How long this agent leads after its "
                                                       "last accepted request.")
    scheduler = AgentSchedulerSerializer(help_text="With placement osmo: how the agent's "
                                                   "scheduler runs its cycles.")


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
    usage = serializers.DictField(child=serializers.FloatField(), required=False,
                                  help_text="When asked: leaf queue → its decayed GPU usage "
                                            "(0..1); empty without OSMO_USAGE_HALF_LIFE.")
