"""A Kubernetes backend served by an agent that dials out (API.md "Backends", the agent).

The service half lives here: ``access.py`` (which tokens may act as which backend),
``services.py`` (register, messages in, work out), ``pods.py`` (pod status through the
listener's path), ``work.py`` (the per-backend work queue), ``lease.py`` (which of its
agents leads). The agent half is the ``agent`` package below it (``python -m
scheduler.backends.agent.process``; ``osmo backend-agent``): it imports no model and needs no
database, only the service's URL, a token and the cluster's kubeconfig.
"""
