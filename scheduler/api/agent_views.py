"""The agent's endpoints: register, messages in, work out (long-poll). Shape and
permissions only; the writes are `scheduler/backends/agent/services.py`'s."""

from __future__ import annotations

import time

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from ..backends.agent import services
from ..backends.agent.access import require_agent_of
from ..backends.agent.lease import lease_seconds
from ..backends.agent.live_logs import logs_wanted
from ..backends.spec import spec_of
from ..cycle_config import remote_scheduler
from ..usage import queue_usage
from . import agent_serializers as s

POLL_STEP_SECONDS = 0.25


def _valid(serializer_class, request) -> dict:
    body = serializer_class(data=request.data)
    body.is_valid(raise_exception=True)
    return body.validated_data


class AgentRegisterView(APIView):
    @extend_schema(request=s.AgentRegisterSerializer, responses=s.AgentRegisteredSerializer,
                   summary="An agent (re)connects: the cluster's identity is checked")
    def post(self, request, name: str):
        require_agent_of(request.user, name)
        body = _valid(s.AgentRegisterSerializer, request)
        backend, session = services.agent_register(name=name, k8s_uid=body["k8s_uid"],
                                                   version=body["version"],
                                                   instance=body["instance"])
        return Response({"name": backend.name, "k8s_namespace": backend.k8s_namespace,
                         "placement": backend.placement,
                         "scheduler_name": backend.scheduler_name,
                         "session": session.isoformat(),
                         "lease_seconds": lease_seconds(),
                         "scheduler": remote_scheduler(spec_of(backend))})


class AgentMessagesView(APIView):
    @extend_schema(request=s.AgentMessagesSerializer, responses=s.AgentAckedSerializer,
                   summary="Messages from the agent (each id applied once), acked")
    def post(self, request, name: str):
        require_agent_of(request.user, name)
        body = _valid(s.AgentMessagesSerializer, request)
        backend = services.agent_backend(name, body["instance"])
        return Response({"acked": services.agent_messages(backend=backend,
                                                          messages=body["messages"])})


class AgentWorkView(APIView):
    @extend_schema(request=s.AgentPollSerializer, responses=s.AgentWorkSerializer,
                   summary="Acks of done work in; the backend's unacked work out (long-poll)")
    def post(self, request, name: str):
        require_agent_of(request.user, name)
        body = _valid(s.AgentPollSerializer, request)
        backend = services.agent_backend(name, body["instance"])  # renews the lease
        deadline = time.monotonic() + body["wait"]
        acks = body["acks"]
        following = set(body["following"])
        arrived = True
        while True:
            items = services.agent_poll(backend=backend, acks=acks, after=body["after"],
                                        instance=body["instance"], arrived=arrived)
            acks, arrived = [], False
            # A reader who just opened a running task's log is not kept waiting for work.
            logs = logs_wanted(backend.name)
            if items or {log["pod"] for log in logs} != following \
                    or time.monotonic() >= deadline:
                answer = {"work": items, "logs": logs}
                if body["usage"]:
                    answer["usage"] = queue_usage(now=timezone.now(),
                                                  namespace=backend.k8s_namespace)
                return Response(answer)
            time.sleep(POLL_STEP_SECONDS)
