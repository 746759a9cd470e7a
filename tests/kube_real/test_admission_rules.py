"""The admission rules of workflows.spec.apiserver_rules, checked against the real API server:
what admission refuses, the server refuses too (422, shown by a server-side dry run of the
object the value would be in; 400 when it cannot even be decoded), and what admission lets
through, the server accepts."""

from __future__ import annotations

import copy

import pytest

from tests.k8s.conftest import submit
from workflows.spec import apiserver_rules

from .server import KubeError

pytestmark = pytest.mark.django_db

EDGE_SPEC = """
workflow:
  name: edge
  groups:
  - name: g
    tasks:
    - name: t
      image: "nvcr.io/nvidia/pytorch@sha256:{digest}"
      command: [run]
      lead: true
      resource: r
      environment: {_A.b-1: x, -dash: y, a..b: z, MY_VAR: "1", x.: "", Z9: "{{host:u}}"}
      files:
      - {path: /opt/a, contents: a}
      - {path: opt/b, contents: b}
      - {path: "weird dir/with:colon", contents: c}
    - {name: u, image: x, command: [run], resource: r}
  resources:
    r: {gpu: 1, cpu: 0.0001, memory: 1e3, storage: 0.5Gi}
""".replace("{digest}", "0123456789abcdef" * 4)


def test_what_admission_accepts_the_api_server_accepts(backend, cluster, alice, team) -> None:
    name = submit(alice, "team", EDGE_SPEC)
    summary = backend.dispatch()
    assert (summary.applied, summary.failed) == ([f"{name}-g"], [])
    pod = cluster.get("pods", f"{name}-g-t")
    assert {e["name"] for e in pod["spec"]["containers"][0]["env"]} == {
        "_A.b-1", "-dash", "a..b", "MY_VAR", "x.", "Z9"}


def pod(namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace, "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}


def with_container(namespace: str, **fields) -> dict:
    manifest = pod(namespace)
    manifest["spec"]["containers"][0].update(fields)
    return manifest


def refused(apiserver, manifest: dict) -> bool:
    try:
        apiserver.create(manifest, dry_run=True)
    except KubeError as exc:
        assert exc.status in (400, 422), exc  # 400: not even decodable (a bad quantity)
        return True
    return False


def test_what_admission_refuses_the_api_server_refuses(apiserver, namespace) -> None:
    base = pod(namespace)
    assert not refused(apiserver, base)
    cases = {
        "env name": (apiserver_rules.env_var_name("1-BAD NAME"),
                     with_container(namespace, env=[{"name": "1-BAD NAME", "value": "x"}])),
        "env ..": (apiserver_rules.env_var_name("..x"),
                   with_container(namespace, env=[{"name": "..x", "value": "x"}])),
        "image": (apiserver_rules.image(" x"), with_container(namespace, image=" x")),
        "port": (apiserver_rules.port_number(70000),
                 with_container(namespace, ports=[{"containerPort": 70000}])),
        "quantity": (apiserver_rules.quantity("lots"),
                     with_container(namespace, resources={"limits": {"memory": "lots"}})),
        "negative quantity": (apiserver_rules.quantity("-1"),
                              with_container(namespace, resources={"requests": {"cpu": "-1"}})),
        "container name": (apiserver_rules.dns_label("Main_C"),
                           with_container(namespace, name="Main_C")),
        "mount twice": (apiserver_rules.mount_paths(["/a", "/a"]), with_container(
            namespace, volumeMounts=[{"name": "v", "mountPath": "/a"},
                                     {"name": "v", "mountPath": "/a", "subPath": "x"}])),
    }
    label_key, label_value = copy.deepcopy(base), copy.deepcopy(base)
    label_key["metadata"]["labels"] = {"bad key": "v"}
    label_value["metadata"]["labels"] = {"team": "not ok!"}
    cases["label key"] = (apiserver_rules.qualified_name("bad key"), label_key)
    cases["label value"] = (apiserver_rules.label_value("not ok!"), label_value)
    name = copy.deepcopy(base)
    name["metadata"]["name"] = "Bad_Name"
    cases["pod name"] = (apiserver_rules.dns_subdomain("Bad_Name"), name)
    for manifest in (c[1] for c in cases.values()):
        if "volumeMounts" in manifest["spec"]["containers"][0]:
            manifest["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    for case, (problems, manifest) in cases.items():
        assert problems, f"{case}: admission would let it through"
        assert refused(apiserver, manifest), f"{case}: the API server took it"
    big = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big",
                                                              "namespace": namespace},
           "stringData": {"file-0": "x" * (apiserver_rules.SECRET_MAX_BYTES + 1)}}
    assert apiserver_rules.secret_size([big["stringData"]["file-0"]])
    assert refused(apiserver, big)
    big["stringData"]["file-0"] = "x" * apiserver_rules.SECRET_MAX_BYTES
    assert not apiserver_rules.secret_size([big["stringData"]["file-0"]])
    assert not refused(apiserver, big)
