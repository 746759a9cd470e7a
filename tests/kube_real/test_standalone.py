"""`osmo standalone` with OSMO_CLUSTER_BACKEND=kubernetes against the real API server: one
command, ready once the agent it runs for that kubeconfig connected (the agent's RBAC of
deploy/kubernetes/agent, none of the service's settings in its environment), workflows
dispatched as pods through the agent, and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from osmo.embedded import free_port
from tests.processes import command_lines

from .agent import SERVICE_ONLY, agent_kubeconfig, install_agent_rbac
from .conftest import wait_for


def _call(url: str, token: str | None = None, body: dict | None = None,
          method: str = "GET") -> tuple[int, dict]:
    request = urllib.request.Request(url, data=None if body is None else
                                     json.dumps(body).encode(), method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.timeout(240)
def test_standalone_serves_the_cluster_through_an_agent_it_runs(apiserver, namespace,
                                                                 tmp_path) -> None:
    install_agent_rbac(apiserver, namespace)
    kubeconfig = agent_kubeconfig(apiserver, tmp_path / "agent.kubeconfig")
    port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    env.update(OSMO_CLUSTER_BACKEND="kubernetes", OSMO_NAMESPACE=namespace,
               OSMO_KAI_KUBECONFIG=str(kubeconfig), OSMO_K8S_INTERVAL="0.5")
    log = tmp_path / "standalone.log"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("osmo")), "standalone", "--port", str(port),
         "--data-dir", str(data), "--no-demo", "--web-workers", "1"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    descendants: list[psutil.Process] = []
    try:
        ready = process.stdout.readline().strip()
        assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
        token = process.stdout.readline().strip().removeprefix("token: ")
        descendants = psutil.Process(process.pid).children(recursive=True)
        lines = command_lines(descendants)
        commands = " ".join(line for _, line in lines)
        assert "run_k8s_backend" not in commands and "run_scheduler" not in commands
        agents = [proc for proc, line in lines if "scheduler.backends.agent.process" in line]
        assert len(agents) == 1, commands
        agent_token = (data / "agent-token").read_text().strip()
        assert agent_token and agent_token not in commands  # read from its environment
        agent_env = agents[0].environ()
        assert agent_env["OSMO_AGENT_TOKEN"] == agent_token
        assert sorted(set(SERVICE_ONLY) & set(agent_env)) == []
        base = f"http://127.0.0.1:{port}"
        status, health = _call(f"{base}/api/health")
        backends = health.pop("backends")
        # The tier's cluster has KAI's CRDs and PriorityClasses: placement lacks nothing.
        assert (status, health) == (200, {"status": "ok", "database": "ok", "broker": "ok",
                                          "cluster": "ok",
                                          "placement": {"ok": True, "missing": []}})
        assert (backends["default"]["status"], backends["default"]["online"]) == (
            "ONLINE", True)  # the agent's heartbeats
        status, backend = _call(f"{base}/api/configs/backend/default", token)
        kube_system = apiserver.request("GET", "/api/v1/namespaces/kube-system")
        assert (status, backend["k8s_uid"]) == (200, kube_system["metadata"]["uid"])
        status, made = _call(f"{base}/api/configs/pool/team", token, {"quota_gpus": 8},
                             method="PUT")
        assert status == 201, made
        spec = ("workflow:\n  name: hello\n  tasks:\n  - {name: main, image: x, "
                "command: [sleep, '30'], resource: r}\n  resources:\n    r: {gpu: 1}\n")
        status, body = _call(f"{base}/api/pool/team/workflow", token, {"file": spec},
                             method="POST")
        assert status == 201, body
        wait_for(lambda: [p for p in _pods(apiserver, namespace) if p.startswith(body["name"])],
                 timeout=30, what="the workflow's pod on the cluster")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    time.sleep(1)
    postgres = [p for p in psutil.process_iter(["name", "cmdline"])
                if p.info["name"] == "postgres" and str(data) in " ".join(p.info["cmdline"] or [])]
    assert postgres == []
    assert [p for p in descendants if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []


def _pods(apiserver, namespace: str) -> list[str]:
    body = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    return [item["metadata"]["name"] for item in body["items"]]
