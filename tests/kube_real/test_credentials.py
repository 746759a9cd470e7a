"""A task's credentials on the real API server: each becomes a Secret in the workflow's
namespace, owned by the task's pods and deleted with the group; REGISTRY ones are the pods'
image-pull secrets, GENERIC and DATA ones mounted or set as variables, as the spec asks. The
secret values appear in no answer, log line or metric of the run."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from django.test import Client

from tests.k8s.conftest import submit

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-Value-9f2c71"
DATA_SECRET = "d4ta-Secret-77ab10"
REGISTRY_SECRET = "r3g-Secret-5c1d22"

SPEC = """
workflow:
  name: creds
  groups:
  - name: g
    tasks:
    - name: t0
      lead: true
      image: nvcr.io/team/trainer:1
      command: [train]
      resource: r
      environment: {PLAIN: x}
      credentials:
        omni: {OMNI_USER: omni_user, OMNI_PASS: omni_pass}
        ngc: null
    - name: w
      image: nvcr.io/team/trainer:1
      command: [work]
      resource: r
      replicas: 2
      credentials:
        bucket: /var/run/bucket
  resources:
    r: {gpu: 1, cpu: 2, memory: 8Gi}
"""


def decoded(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


@pytest.fixture
def alice_creds(alice):
    for name, body in (
            ("omni", {"generic_credential": {"credential": {"omni_user": "me",
                                                             "omni_pass": SECRET}}}),
            ("bucket", {"data_credential": {"endpoint": "s3://bucket",
                                            "access_key_id": "AKIA",
                                            "access_key": DATA_SECRET}}),
            ("ngc", {"registry_credential": {"registry": "nvcr.io", "username": "$oauthtoken",
                                             "auth": REGISTRY_SECRET}})):
        assert alice.post(f"/api/credentials/{name}", body, format="json").status_code == 200
    return alice


def test_credentials_become_secrets_owned_by_the_pods(backend, cluster, alice_creds, team,
                                                      admin, namespace, caplog) -> None:
    alice = alice_creds
    caplog.set_level(logging.DEBUG)
    outputs = []
    name = submit(alice, "team", SPEC)
    assert backend.dispatch().applied == [f"{name}-g"]
    pg = f"{name}-g"
    # The workers name no registry credential: theirs comes by their images' host.
    assert cluster.names("secrets") == sorted([f"{pg}-t0-omni-cred", f"{pg}-t0-ngc-cred",
                                               f"{pg}-w-bucket-cred", f"{pg}-w-ngc-cred"])
    t0 = cluster.get("pods", f"{pg}-t0")
    workers = [cluster.get("pods", f"{pg}-w-{i}") for i in range(2)]

    omni = cluster.get("secrets", f"{pg}-t0-omni-cred")
    assert omni["metadata"]["namespace"] == namespace
    assert (omni["type"], decoded(omni)) == ("Opaque", {"omni_user": "me",
                                                        "omni_pass": SECRET})
    assert omni["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": t0["metadata"]["name"],
         "uid": t0["metadata"]["uid"]}]
    assert omni["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "osmo"
    env = t0["spec"]["containers"][0]["env"]
    assert {e["name"]: e.get("valueFrom") or e.get("value") for e in env} == {
        "PLAIN": "x",
        "OMNI_USER": {"secretKeyRef": {"name": f"{pg}-t0-omni-cred", "key": "omni_user"}},
        "OMNI_PASS": {"secretKeyRef": {"name": f"{pg}-t0-omni-cred", "key": "omni_pass"}}}

    ngc = cluster.get("secrets", f"{pg}-t0-ngc-cred")
    assert ngc["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(decoded(ngc)[".dockerconfigjson"])["auths"]
    assert auths == {"nvcr.io": {
        "username": "$oauthtoken", "password": REGISTRY_SECRET,
        "auth": base64.b64encode(f"$oauthtoken:{REGISTRY_SECRET}".encode()).decode()}}
    assert t0["spec"]["imagePullSecrets"] == [{"name": f"{pg}-t0-ngc-cred"}]
    for worker in workers:
        assert worker["spec"]["imagePullSecrets"] == [{"name": f"{pg}-w-ngc-cred"}]

    bucket = cluster.get("secrets", f"{pg}-w-bucket-cred")
    assert decoded(bucket) == {"endpoint": "s3://bucket", "access_key_id": "AKIA",
                               "access_key": DATA_SECRET}
    assert sorted((r["name"], r["uid"]) for r in bucket["metadata"]["ownerReferences"]) == \
        sorted((p["metadata"]["name"], p["metadata"]["uid"]) for p in workers)
    for worker in workers:
        volumes = [v for v in worker["spec"]["volumes"] if v["name"].startswith("osmo-cred-")]
        assert [v["secret"]["secretName"] for v in volumes] == [f"{pg}-w-bucket-cred"]
        mounts = [m for m in worker["spec"]["containers"][0]["volumeMounts"]
                  if m["name"] == volumes[0]["name"]]
        assert [(m["mountPath"], m["readOnly"]) for m in mounts] == [("/var/run/bucket", True)]

    # A second pass adopts what exists and creates nothing twice.
    assert backend.dispatch().applied == []
    backend.listen()
    for path in (f"/api/workflow/{name}", f"/api/workflow/{name}/kai",
                 f"/api/workflow/{name}/spec", f"/api/workflow/{name}/events",
                 f"/api/workflow/{name}/logs?follow=false", "/api/credentials", "/api/task",
                 f"/api/workflow/{name}/explain"):
        response = alice.get(path)
        outputs.append(b"".join(response.streaming_content) if response.streaming
                       else response.content)
    browser = Client()
    browser.force_login(alice.user)
    for page in (f"/workflows/{name}/", "/workflows/"):
        answer = browser.get(page)
        assert answer.status_code == 200
        outputs.append(answer.content)
    assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
    assert backend.cleanup() == 1
    assert cluster.names("secrets") == []  # deleted with the group's pods
    backend.listen()
    metrics = admin.get("/metrics")
    assert metrics.status_code == 200
    outputs.append(metrics.content)
    outputs.append(caplog.text.encode())
    everything = b"\n".join(outputs)
    for value in (SECRET, DATA_SECRET, REGISTRY_SECRET):
        assert value.encode() not in everything
        assert base64.b64encode(value.encode()) not in everything


HOSTS_SPEC = """
workflow:
  name: hosts
  groups:
  - name: g
    tasks:
    - {name: hub, image: "ubuntu:22.04", command: [a], resource: r, lead: true,
       credentials: {ghcr: null}}
    - {name: ghcr, image: "ghcr.io/team/tool:2", command: [b], resource: r}
    - {name: local, image: "registry.local:5000/x/y", command: [c], resource: r}
  resources:
    r: {gpu: 1, cpu: 2, memory: 8Gi}
"""


def registries(client, scopes: dict[str, str]) -> None:
    """REGISTRY credentials of ``client``'s, by name: the registry (and path) each serves."""
    for name, registry in scopes.items():
        body = {"registry_credential": {"registry": registry, "username": name,
                                        "auth": f"{name}-{REGISTRY_SECRET}"}}
        assert client.post(f"/api/credentials/{name}", body, format="json").status_code == 200


def dispatched_pulls(backend, cluster, client, text: str, tasks) -> tuple[str, dict]:
    """Submit ``text``, dispatch its group; (its PodGroup, each task's pod's pull Secrets)."""
    name = submit(client, "team", text)
    assert backend.dispatch().applied == [f"{name}-g"]
    pg = f"{name}-g"
    return pg, {task: cluster.get("pods", f"{pg}-{task}")["spec"].get("imagePullSecrets")
                for task in tasks}


def test_a_pod_pulls_with_the_registry_credentials_of_its_images_hosts_only(
        backend, cluster, alice, team) -> None:
    registries(alice, {"ghcr": "https://ghcr.io/team", "hub": "",
                       "local": "registry.local:5000", "other": "quay.io"})
    pg, pulls = dispatched_pulls(backend, cluster, alice, HOSTS_SPEC, ("hub", "ghcr", "local"))
    # "hub" names ghcr, whose host its image does not come from: it pulls with hub's only.
    assert pulls == {"hub": [{"name": f"{pg}-hub-hub-cred"}],
                     "ghcr": [{"name": f"{pg}-ghcr-ghcr-cred"}],
                     "local": [{"name": f"{pg}-local-local-cred"}]}
    assert cluster.names("secrets") == sorted(
        [f"{pg}-hub-hub-cred", f"{pg}-ghcr-ghcr-cred", f"{pg}-local-local-cred"])
    hosts = {secret: list(json.loads(decoded(cluster.get("secrets", secret))
                                     [".dockerconfigjson"])["auths"])
             for secret in cluster.names("secrets")}
    assert hosts == {f"{pg}-hub-hub-cred": ["docker.io"],
                     f"{pg}-ghcr-ghcr-cred": ["ghcr.io/team"],  # its path: kubelet's match
                     f"{pg}-local-local-cred": ["registry.local:5000"]}


SCOPES_SPEC = """
workflow:
  name: scopes
  groups:
  - name: g
    tasks:
    - {name: a, image: "nvcr.io/nvidia/team-a/trainer:1", command: [a], resource: r, lead: true}
    - {name: b, image: "nvcr.io/nvidia/team-b/trainer:1", command: [b], resource: r}
    - {name: ab, image: "nvcr.io/nvidia/team-ab/trainer:1", command: [c], resource: r}
    - {name: other, image: "nvcr.io/other/tool", command: [d], resource: r}
  resources:
    r: {gpu: 1, cpu: 2, memory: 8Gi}
"""


def test_each_image_pulls_with_its_most_specific_registry_credential(
        backend, cluster, alice, team) -> None:
    registries(alice, {"team-a": "nvcr.io/nvidia/team-a", "team-b": "nvcr.io/nvidia/team-b",
                       "nvidia": "https://nvcr.io/nvidia/", "ngc": "nvcr.io"})
    pg, pulls = dispatched_pulls(backend, cluster, alice, SCOPES_SPEC, ("a", "b", "ab", "other"))
    # One user's two credentials of one host, each for its own path; team-ab is not team-a's.
    assert pulls == {"a": [{"name": f"{pg}-a-team-a-cred"}],
                     "b": [{"name": f"{pg}-b-team-b-cred"}],
                     "ab": [{"name": f"{pg}-ab-nvidia-cred"}],
                     "other": [{"name": f"{pg}-other-ngc-cred"}]}
    logins = {secret: json.loads(decoded(cluster.get("secrets", secret))[".dockerconfigjson"])
              ["auths"] for secret in cluster.names("secrets")}
    assert {secret: {scope: login["username"] for scope, login in auths.items()}
            for secret, auths in logins.items()} == {
        f"{pg}-a-team-a-cred": {"nvcr.io/nvidia/team-a": "team-a"},
        f"{pg}-b-team-b-cred": {"nvcr.io/nvidia/team-b": "team-b"},
        f"{pg}-ab-nvidia-cred": {"nvcr.io/nvidia": "nvidia"},
        f"{pg}-other-ngc-cred": {"nvcr.io": "ngc"}}
