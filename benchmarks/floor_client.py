"""One process of ``k8s_fill.py``'s floor: bare clients writing what the product writes per job
— its PodGroup and its pod — and binding the pod, on ``threads`` threads with a keep-alive
HTTP/1.1 connection each. A process of its own, so that the floor's clients share no
interpreter lock with each other's process or with the kubelet stand-in.

Reads one JSON line on stdin (``base``, ``token``, ``cafile``, ``namespace``, ``threads``,
``jobs``: ``[podgroup, pod, node]`` each), answers ``ready`` once its connections are open,
starts on a ``go`` line and ends with one JSON line: ``{"done": N, "errors": [...]}``; it exits
non-zero when a request failed.

    python benchmarks/floor_client.py < job.json
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx


def main() -> int:
    order = json.loads(sys.stdin.readline())
    verify = ssl.create_default_context(cafile=order["cafile"])
    namespace = order["namespace"]
    local = threading.local()
    clients: list[httpx.Client] = []
    lock = threading.Lock()

    def client() -> httpx.Client:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=order["base"], verify=verify, timeout=120,
                                      headers={"Authorization": f"Bearer {order['token']}",
                                               "Content-Type": "application/json"})
            local.http.get("/version").raise_for_status()  # the connection is open
            with lock:
                clients.append(local.http)
        return local.http

    def post(path: str, body: dict) -> None:
        response = client().post(path, content=json.dumps(body))
        if response.status_code >= 400:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:200]}")

    def job(podgroup: dict, pod: dict, node: str) -> None:
        post(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{namespace}/podgroups", podgroup)
        post(f"/api/v1/namespaces/{namespace}/pods", pod)
        name = pod["metadata"]["name"]
        post(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    threads = order["threads"]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        barrier = threading.Barrier(threads)
        for future in [pool.submit(lambda: (client(), barrier.wait())) for _ in range(threads)]:
            future.result()
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 2
        futures = [pool.submit(job, *each) for each in order["jobs"]]
        errors = [repr(future.exception()) for future in futures if future.exception()]
    for http in clients:
        http.close()
    print(json.dumps({"done": len(futures) - len(errors), "errors": errors[:10]}), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
