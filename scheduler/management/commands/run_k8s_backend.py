"""`manage.py run_k8s_backend [--interval S] [--kubeconfig PATH]`: the Kubernetes backend.

Dispatches runnable workflow groups to the cluster as KAI PodGroups and pods, watches the pods
back into task statuses, cleans up ended groups and keeps the node inventory. One instance is
active at a time (PostgreSQL advisory lock); others wait and take over. See
:mod:`scheduler.backends.kubernetes.runner`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from osmo import process_gc
from osmo.observability.server import serve_if_configured
from scheduler.backends.kubernetes.client import api_client
from scheduler.backends.kubernetes.runner import BackendRunner


class Command(BaseCommand):
    help = ("Run the Kubernetes cluster backend (OSMO_CLUSTER_BACKEND=kubernetes): dispatch "
            "PodGroups and pods to KAI, watch pod status, clean up, sync nodes.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--interval", type=float, default=None,
                            help="Seconds between passes (default OSMO_K8S_INTERVAL).")
        parser.add_argument("--kubeconfig", default=None,
                            help="kubeconfig file (default OSMO_KAI_KUBECONFIG, KUBECONFIG, "
                                 "~/.kube/config, else in-cluster).")

    def handle(self, *args, interval, kubeconfig, **options) -> None:
        if settings.OSMO_CLUSTER_BACKEND != "kubernetes":
            raise CommandError("OSMO_CLUSTER_BACKEND is not 'kubernetes': the embedded cluster "
                               "needs no backend process (run_scheduler places its pods).")
        try:
            api_client(kubeconfig=kubeconfig).close()  # fail fast on a missing kubeconfig
        except Exception as exc:  # noqa: BLE001 - any configuration error
            raise CommandError(f"cannot configure the Kubernetes client: {exc}") from exc
        serve_if_configured()
        process_gc.settle(busy=True)
        BackendRunner(interval=interval, client_factory=lambda: api_client(kubeconfig=kubeconfig),
                      placement_process=True, kubeconfig=kubeconfig).run()
