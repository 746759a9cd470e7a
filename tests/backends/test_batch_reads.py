"""One claim of many groups reads the cluster Topology once and each submitter's REGISTRY
credentials once (scheduler/batch_reads.py), and every group still gets what its own read
would have given."""

from __future__ import annotations

import base64
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from credentials.models import Credential
from scheduler.backends.agent.work import claim_groups
from scheduler.batch_reads import once, one_batch
from scheduler.models import AgentWork, Backend, ClusterTopology
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import alice, spec, submit  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


def test_once_reads_once_per_key_inside_a_batch_and_every_time_outside():
    reads = []

    def read(value):
        reads.append(value)
        return value

    assert [once("k", lambda: read(1)), once("k", lambda: read(2))] == [1, 2]
    with one_batch():
        assert [once("k", lambda: read(3)), once("k", lambda: read(4)),
                once("j", lambda: read(5))] == [3, 3, 5]
    assert once("k", lambda: read(6)) == 6
    assert reads == [1, 2, 3, 5, 6]


def test_a_claim_reads_the_topology_and_each_submitters_registries_once(admin_client, alice):
    assert admin_client.post("/api/configs/backend/east", {
        "kind": "kubernetes", "k8s_namespace": "east"}, format="json").status_code == 201
    factories.pool("team", 64, backends=["east"])
    bob = make_client("bob", "osmo-team-user")
    for who, user in (("alice", alice), ("bob", bob)):
        assert user.post("/api/credentials/ngc", {"registry_credential": {
            "registry": "nvcr.io", "username": "$oauthtoken", "auth": f"{who}-secret"}},
            format="json").status_code == 200
    owners = {submit(user, "team", spec(f"w{i}", gpus=1)): who for i in range(6)
              for who, user in (("alice", alice), ("bob", bob))}
    tables = (Credential._meta.db_table, ClusterTopology._meta.db_table)
    with CaptureQueriesContext(connection) as queries:
        assert claim_groups(Backend.objects.get(name="east")) == len(owners)
    reads = [sum(f'FROM "{table}"' in q["sql"] for q in queries.captured_queries)
             for table in tables]
    assert reads == [2, 1]  # one per submitter; one
    pulls, auths = {}, {}
    for item in AgentWork.objects.filter(backend="east", kind="create"):
        for obj in item.payload["objects"]:
            if obj["kind"] == "Pod":
                pulls[obj["metadata"]["name"]] = obj["spec"]["imagePullSecrets"]
            if obj["kind"] == "Secret":
                config = json.loads(base64.b64decode(obj["data"][".dockerconfigjson"]))
                auths[obj["metadata"]["name"]] = config["auths"]["nvcr.io"]["password"]
    pods = {f"{name}-g-t0": who for name, who in owners.items()}
    assert pulls == {pod: [{"name": f"{pod}-ngc-cred"}] for pod in pods}
    # Each pod pulls with its own submitter's credential, never the other's.
    assert auths == {f"{pod}-ngc-cred": f"{who}-secret" for pod, who in pods.items()}
