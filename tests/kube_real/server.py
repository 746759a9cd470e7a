"""A real kube-apiserver (v1.25) + etcd for the tests, from ``../shared/tools/kube``.

:class:`ApiServer` starts both with ``start-apiserver.sh`` into a run folder, installs what an
operator installs before OSMO (the KAI CRDs, ``deploy/kubernetes``'s namespace,
PriorityClasses and RBAC) and hands out clients: the admin (``system:masters``, used by the
tests to play KAI and the kubelet) and the backend's, a static token whose user is the
ServiceAccount ``osmo/osmo-backend`` — so it holds exactly the permissions ``rbac.yaml`` binds.

Faults: :meth:`stop_apiserver` / :meth:`start_apiserver` stop and restart the API server alone
(etcd and its data stay, so the restarted server starts a new watch cache: older
resourceVersions get 410 Gone); :meth:`compact_etcd` compacts etcd behind its back meanwhile, so
no older resourceVersion can be served from anywhere.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
TOOLS = SHARED / "tools" / "kube"
SCRIPT = TOOLS / "start-apiserver.sh"
BINARY = TOOLS / "kube-apiserver-v1.25.0-k3s1.gz"
CRDS = SHARED / "reference" / "kai-crds"
DEPLOY = REPO / "deploy" / "kubernetes"
# The PriorityClasses KAI Scheduler installs; its pod grouper gives workloads without a class
# one of these (a Job's pods get ``train``), so workloads name them.
KAI_PRIORITY_CLASSES = {"inference": 125, "build": 100, "build-preemptible": 75, "train": 50}
CRD_FILES = ("scheduling.run.ai_queues.yaml", "scheduling.run.ai_podgroups.yaml",
             "kai.scheduler_topologies.yaml", "scheduling.run.ai_bindrequests.yaml")

BACKEND_NAMESPACE = "osmo"
BACKEND_ACCOUNT = "osmo-backend"
BACKEND_USER = f"system:serviceaccount:{BACKEND_NAMESPACE}:{BACKEND_ACCOUNT}"
BACKEND_TOKEN = "osmo-backend-test-token"

# kind → (URL prefix, plural, namespaced) for the kinds the manifests and tests create.
KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "Service": ("/api/v1", "services", True),
    "Pod": ("/api/v1", "pods", True),
    "Node": ("/api/v1", "nodes", False),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "ValidatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1",
                                       "validatingwebhookconfigurations", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1",
                                 "customresourcedefinitions", False),
}


class KubeError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"{status}: {body[:2000]}")
        self.status = status
        self.body = body


def unavailable_reason() -> str | None:
    """Why the tier cannot run here, or None."""
    if not BINARY.exists():
        return (f"no kube-apiserver binary at {BINARY} (the sibling folder ../shared of the "
                f"checkout): the real-API-server tier needs it")
    return None


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def strip_cel(node: Any) -> Any:
    """The CRD without ``x-kubernetes-validations`` (v1.25 refuses the Topology's CEL rule
    as over its cost budget)."""
    if isinstance(node, dict):
        return {k: strip_cel(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [strip_cel(v) for v in node]
    return node


def _kubeconfig(server: str, ca: str, token: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": server,
                                                    "certificate-authority": ca}}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}]})


class ApiServer:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.kubeconfig: Path | None = None
        self.backend_kubeconfig = run_dir / "backend-kubeconfig"
        self.server = ""
        self._apiserver_argv: list[str] | None = None

    # --- lifecycle ---------------------------------------------------------------------------
    def _script(self, *args: str) -> str:
        env = {**os.environ, "ETCD_PYTHON": sys.executable,
               "KUBE_EXTRA_TOKENS": f"{BACKEND_TOKEN},{BACKEND_USER},backend-uid,"
                                    "system:serviceaccounts"}
        done = subprocess.run(["bash", str(SCRIPT), str(self.run_dir), *args], env=env,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"start-apiserver.sh {' '.join(args)} failed: "
                               f"{done.stderr[-3000:]}")
        return done.stdout

    def start(self) -> ApiServer:
        out = self._script()
        self.kubeconfig = Path(out.strip().splitlines()[-1])
        config = yaml.safe_load(self.kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.server = cluster["server"]
        self.backend_kubeconfig.write_text(_kubeconfig(self.server,
                                                       cluster["certificate-authority"],
                                                       BACKEND_TOKEN))
        self.install()
        return self

    def stop(self) -> None:
        self._script("stop")

    def pid(self, name: str) -> int:
        """The process id of `name` (`kube-apiserver`, `etcd`)."""
        return int((self.run_dir / f"{name}.pid").read_text().strip())

    def stop_apiserver(self) -> None:
        """The API server goes away (etcd keeps running and keeps its data)."""
        pid = self.pid("kube-apiserver")
        self._apiserver_argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0") \
            .decode().split("\0")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            # our child only through the script's shell, which has exited: not a zombie of ours
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    def start_apiserver(self) -> None:
        """Start the API server again, as it was, on the same port."""
        assert self._apiserver_argv, "stop_apiserver() first"
        log = (self.run_dir / "kube-apiserver.log").open("ab")
        process = subprocess.Popen(self._apiserver_argv, stdout=log, stderr=log,
                                   start_new_session=True)
        (self.run_dir / "kube-apiserver.pid").write_text(str(process.pid))
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.request("GET", "/readyz")
                return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.1)
        raise RuntimeError("the kube-apiserver did not become ready")

    def _etcd(self, call: str, body: dict) -> dict:
        argv = Path(f"/proc/{self.pid('etcd')}/cmdline").read_bytes().decode().split("\0")
        url = argv[argv.index("--listen-client-urls") + 1]
        request = urllib.request.Request(f"{url}/v3/{call}", data=json.dumps(body).encode(),
                                         method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return json.loads(response.read())

    def compact_etcd(self) -> None:
        """One write straight to etcd (its v3 JSON gateway), then a compaction up to it: every
        resourceVersion handed out so far is gone, as after a long outage."""
        put = self._etcd("kv/put", {"key": base64.b64encode(b"/osmo-test/bump").decode(),
                                    "value": base64.b64encode(b"x").decode()})
        self._etcd("kv/compaction", {"revision": put["header"]["revision"], "physical": True})

    # --- clients -----------------------------------------------------------------------------
    def admin_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(str(self.kubeconfig))

    def backend_client(self) -> Any:
        from scheduler.backends.kubernetes.client import api_client

        return api_client(kubeconfig=str(self.backend_kubeconfig))

    def request(self, method: str, path: str, body: Any = None,
                query: list[tuple[str, str]] | None = None,
                content_type: str = "application/json", token: str | None = None) -> Any:
        """One raw call as the admin (or with ``token``); the decoded JSON body. Raises
        :class:`KubeError` on an error status."""
        import ssl

        import httpx

        config = yaml.safe_load(self.kubeconfig.read_text())
        token = token or config["users"][0]["user"]["token"]
        ca = config["clusters"][0]["cluster"]["certificate-authority"]
        response = httpx.request(
            method, f"{self.server}{path}", params=query or None,
            content=None if body is None else json.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": content_type,
                     "Accept": "application/json"},
            verify=ssl.create_default_context(cafile=ca), timeout=30)
        if response.status_code >= 400:
            raise KubeError(response.status_code, response.text)
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return response.text

    # --- objects -----------------------------------------------------------------------------
    def path_of(self, obj: dict[str, Any], name: str | None = None) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        if kind in KINDS:
            prefix, plural, namespaced = KINDS[kind]
        else:  # our custom resources
            plural = {"Queue": "queues", "PodGroup": "podgroups", "Topology": "topologies",
                      "BindRequest": "bindrequests"}[kind]
            prefix, namespaced = f"/apis/{api_version}", kind in ("PodGroup", "BindRequest")
        namespace = (obj.get("metadata") or {}).get("namespace")
        base = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced else \
            f"{prefix}/{plural}"
        return f"{base}/{name}" if name else base

    def create(self, obj: dict[str, Any], *, dry_run: bool = False,
               exist_ok: bool = False) -> Any:
        try:
            return self.request("POST", self.path_of(obj), obj,
                                query=[("dryRun", "All")] if dry_run else None)
        except KubeError as exc:
            if exist_ok and exc.status == 409:
                return None
            raise

    def install(self) -> None:
        """What an operator installs before OSMO: KAI's CRDs and PriorityClasses, then the
        namespace, the PriorityClasses and the RBAC of deploy/kubernetes."""
        for name in CRD_FILES:
            for crd in load_documents(CRDS / name):
                self.create(strip_cel(crd) if crd["spec"]["group"] == "kai.scheduler"
                            else crd, exist_ok=True)
        for name in CRD_FILES:
            for crd in load_documents(CRDS / name):
                self._wait_established(crd["metadata"]["name"])
        for name, value in KAI_PRIORITY_CLASSES.items():
            self.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": name}, "value": value}, exist_ok=True)
        for name in ("namespace.yaml", "priorityclasses.yaml", "rbac.yaml"):
            for doc in load_documents(DEPLOY / name):
                self.create(doc, exist_ok=True)
        self.create({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "default", "namespace": BACKEND_NAMESPACE}},
                    exist_ok=True)

    def _wait_established(self, name: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            crd = self.request("GET", f"/apis/apiextensions.k8s.io/v1/"
                                      f"customresourcedefinitions/{name}")
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                return
            time.sleep(0.05)
        raise RuntimeError(f"CRD {name} was not established")

    def namespace(self, name: str) -> None:
        """A namespace for the backend: its ``default`` ServiceAccount (no controller makes
        it) and the backend's namespaced Role and RoleBinding from rbac.yaml, as they are."""
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.create({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "default", "namespace": name}})
        for doc in load_documents(DEPLOY / "rbac.yaml"):
            if doc["kind"] in ("Role", "RoleBinding"):
                doc = copy.deepcopy(doc)
                doc["metadata"]["namespace"] = name
                self.create(doc)
