"""The backend agent: one process beside (or inside) a Kubernetes cluster that serves one
backend by dialing out to the service (``osmo backend-agent``; ``python -m
scheduler.backends.agent.process``). It holds the service's URL and a token, and the
cluster's kubeconfig — no database, no broker: Django is configured bare (no database, no
app) only so that the Kubernetes helpers it shares with the in-process backend can read their
few settings.

- ``outbox.py``: messages with ids, kept until acked, re-sent after a reconnect;
- ``service.py``: the HTTP calls to the service (register, messages, long-poll for work);
- ``cluster.py``: LIST + WATCH of Nodes and our pods, and the work applied idempotently;
- ``lease.py``: whether this agent may still act (its lease from the service, self-fencing);
- ``main.py``: the threads, the reconnects and standing by while another agent leads.
"""
