"""deploy/kubernetes against the real API server: every manifest is accepted (server-side dry
run for what this server cannot run: Deployments, the Job, the webhook that would call a
Service that is not there), and the backend's RBAC is least privilege — the whole tier runs
under it, and this shows it is no more than that."""

from __future__ import annotations

import pytest

from .server import BACKEND_TOKEN, DEPLOY, KubeError, load_documents

KINDS_SHIPPED = {"Namespace", "PriorityClass", "ServiceAccount", "ClusterRole",
                 "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Job", "Deployment",
                 "Service", "ValidatingWebhookConfiguration"}


def manifests() -> list[dict]:
    return [doc for path in sorted(DEPLOY.glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in load_documents(path)]


def test_every_manifest_is_accepted(apiserver) -> None:
    docs = manifests()
    assert {doc["kind"] for doc in docs} == KINDS_SHIPPED
    for doc in docs:
        apiserver.create(doc, dry_run=True, exist_ok=True)  # 409: installed by the fixture
    classes = {doc["metadata"]["name"]: doc["value"] for doc in docs
               if doc["kind"] == "PriorityClass"}
    assert classes == {"osmo-high": 125, "osmo-normal": 100, "osmo-low": 50}
    webhook = next(doc for doc in docs if doc["kind"] == "ValidatingWebhookConfiguration")
    assert webhook["webhooks"][0]["clientConfig"]["service"]["path"] == \
        "/webhooks/podgroups/validate"
    deployments = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "Deployment"}
    assert set(deployments) == {"osmo-web", "osmo-worker", "osmo-beat", "osmo-backend"}
    web = deployments["osmo-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/api/health"
    kustomized = load_documents(DEPLOY / "kustomization.yaml")[0]["resources"]
    assert sorted(kustomized) == sorted(p.name for p in DEPLOY.glob("*.yaml")
                                        if p.name != "kustomization.yaml")


def can(apiserver, verb: str, resource: str, namespace: str = "", group: str = "",
        subresource: str = "") -> bool:
    review = apiserver.request("POST",
                               "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
                                   "apiVersion": "authorization.k8s.io/v1",
                                   "kind": "SelfSubjectAccessReview",
                                   "spec": {"resourceAttributes": {
                                       "verb": verb, "resource": resource, "group": group,
                                       "namespace": namespace, "subresource": subresource}}},
                               token=BACKEND_TOKEN)
    return review["status"]["allowed"]


def test_the_backend_token_holds_exactly_the_shipped_rbac(apiserver, namespace) -> None:
    assert can(apiserver, "watch", "pods", namespace)
    assert can(apiserver, "create", "podgroups", namespace, "scheduling.run.ai")
    assert can(apiserver, "delete", "queues", group="scheduling.run.ai")
    assert can(apiserver, "list", "nodes")
    assert can(apiserver, "get", "pods", namespace, subresource="log")
    assert can(apiserver, "list", "events", namespace)
    # Nothing beyond it: no pod status, no other kinds, no other namespaces' objects.
    assert not can(apiserver, "patch", "pods", namespace, subresource="status")
    assert not can(apiserver, "update", "pods", namespace)
    assert not can(apiserver, "create", "configmaps", namespace)
    assert not can(apiserver, "create", "deployments", namespace, "apps")
    assert not can(apiserver, "list", "pods", "kube-system")
    assert not can(apiserver, "get", "pods", "kube-system", subresource="log")
    assert not can(apiserver, "create", "pods", namespace, subresource="exec")
    assert not can(apiserver, "create", "events", namespace)
    assert not can(apiserver, "delete", "nodes")
    with pytest.raises(KubeError) as denied:
        apiserver.request("GET", "/api/v1/namespaces/kube-system/secrets", token=BACKEND_TOKEN)
    assert denied.value.status == 403
