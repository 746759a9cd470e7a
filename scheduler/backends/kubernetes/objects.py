"""The Kubernetes objects of one workflow group, exactly as the backend applies them.

Workflows: the PodGroup and Pods are those of ``GET /api/workflow/{name}/kai``
(:func:`scheduler.kai.workflow_manifests.manifests_for` over the stored spec); workloads: the
manifests stored at admission (``Workflow.manifests``). The backend adds only what running them on a
real cluster needs — the decisions, where the documents are silent:

- Ownership, on every object: label ``app.kubernetes.io/managed-by: osmo`` (the listener's
  and cleanup's selector, as on the Queues) and ``osmo.workflow`` / ``osmo.group`` /
  ``osmo.pool`` labels and ``osmo/workflow-name`` / ``osmo/group-name`` annotations (workflow
  pods already carry them; workload pods get them, plus ``osmo/task-name`` = the pod name).
  A pod's task is ``osmo/task-name`` + ``-{osmo/replica-index}`` when it has one.
- The run of the group (``osmo.retry``: 0, then one more each time an exit action reschedules
  it) labels every object, and a rerun's pods are named ``{name}-r{retry}``: a rerun's pods
  never meet its predecessor's, and the listener ignores a pod of an earlier run.
- The PodGroup carries ``osmo/exec-timeout`` (seconds) when the workflow has an exec_timeout:
  our scheduler (``OSMO_PLACEMENT=osmo``) plans reservations on running gangs' deadlines.
- ``spec.schedulerName`` is ``OSMO_SCHEDULER_NAME`` on every pod (workloads included);
  resource quantities are sent as strings (the API server's form; the client insists).
- A workflow group with more than one pod gets a headless Service (``clusterIP: None``,
  ``publishNotReadyAddresses`` so peers resolve before they are ready) named like the
  PodGroup (prefixed ``osmo-`` when that starts with a digit: Service names are DNS-1035), its
  pods ``spec.subdomain`` = that Service, and ``{{host:TASK}}`` in their command, args and
  env values becomes ``{pod}.{service}`` (resolvable through the pod's namespace search
  domain). ``TASK`` is a task name (``t-1`` for a replica) or a spec task (its first pod).
- ``files:`` (inlined contents) become one Secret per task that has files,
  ``{pod-group}-{task}-files``, keys ``file-{i}``, each mounted read-only at its ``path``
  with ``subPath`` (mode 0755: files are often scripts). A relative path is taken from ``/``.
- ``credentials:`` become Secrets and the pods' image-pull secrets, mounts and variables
  (``credential_secrets.py``).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.conf import settings

from scheduler.core.kai_names import (
    EXEC_TIMEOUT_ANNOTATION,
    GROUP_LABEL,
    GROUP_NAME_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PODGROUP_ANNOTATION,
    POOL_LABEL,
    REPLICA_INDEX_ANNOTATION,
    RETRY_LABEL,
    TASK_NAME_ANNOTATION,
    WORKFLOW_LABEL,
    WORKFLOW_NAME_ANNOTATION,
    dns_label,
    label_value,
    retry_name,
)
from scheduler.kai.workflow_manifests import manifests_for, stored_spec
from workflows.spec import WorkflowSpec

from .credential_secrets import add_credentials

HOST_TOKEN = re.compile(r"\{\{\s*host:([^{}\s]+)\s*\}\}")
FILES_VOLUME = "osmo-files"
FILES_MODE = 0o755


@dataclass
class GroupObjects:
    podgroup: dict[str, Any]
    pods: list[dict[str, Any]]
    service: dict[str, Any] | None = None
    secrets: list[dict[str, Any]] = field(default_factory=list)
    # A credential's Secret → the pods that own it (credential_secrets.py); the dispatcher
    # sets the ownerReferences once the pods exist.
    secret_owners: dict[str, list[str]] = field(default_factory=dict)

    def in_create_order(self) -> list[dict[str, Any]]:
        """What pods mount or resolve first, then the PodGroup before its pods (KAI gangs a
        pod only once its PodGroup exists)."""
        return [*self.secrets, *([self.service] if self.service else []), self.podgroup,
                *self.pods]


def owner_labels(workflow, group) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, WORKFLOW_LABEL: label_value(workflow.name),
            GROUP_LABEL: label_value(group.name), POOL_LABEL: label_value(workflow.pool.name),
            RETRY_LABEL: str(group.retry_id)}


def group_selector(workflow_name: str, group_name: str) -> str:
    return (f"{MANAGED_BY_LABEL}={MANAGED_BY},{WORKFLOW_LABEL}={label_value(workflow_name)},"
            f"{GROUP_LABEL}={label_value(group_name)}")


def earlier_runs_selector(workflow_name: str, group_name: str, retry_id: int) -> str:
    """The group's objects of every run before ``retry_id`` (those without the label too)."""
    return f"{group_selector(workflow_name, group_name)},{RETRY_LABEL}!={retry_id}"


def _rename_for_retry(pods: list[dict[str, Any]], retry_id: int) -> None:
    """A rerun's pods get names of their own (``retry_name``): the Service, the host tokens
    and the credentials' owners are worked out from these names."""
    for pod in pods:
        pod["metadata"]["name"] = retry_name(pod["metadata"]["name"], retry_id)


def task_of_pod(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(workflow name, task name) of one of our pods, from its annotations."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    workflow = annotations.get(WORKFLOW_NAME_ANNOTATION)
    task = annotations.get(TASK_NAME_ANNOTATION)
    if not workflow or not task:
        return None
    replica = annotations.get(REPLICA_INDEX_ANNOTATION)
    return workflow, f"{task}-{replica}" if replica is not None else task


def service_name(podgroup: str) -> str:
    return podgroup if podgroup[:1].isalpha() else dns_label(f"osmo-{podgroup}")


def _own(manifest: dict[str, Any], labels: dict[str, str], workflow, group) -> dict[str, Any]:
    metadata = manifest.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    metadata["annotations"] = {**(metadata.get("annotations") or {}),
                               WORKFLOW_NAME_ANNOTATION: workflow.name,
                               GROUP_NAME_ANNOTATION: group.name}
    metadata["namespace"] = settings.OSMO_NAMESPACE
    return manifest


def _resolve_hosts(container: dict[str, Any], hosts: dict[str, str]) -> None:
    def resolve(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return HOST_TOKEN.sub(lambda m: hosts.get(m.group(1), m.group(0)), text)

    for key in ("command", "args"):
        if key in container:
            container[key] = [resolve(word) for word in container[key]]
    for variable in container.get("env") or []:
        if "value" in variable:
            variable["value"] = resolve(variable["value"])


def _file_secret(name: str, files, labels, workflow, group) -> dict[str, Any]:
    data = {f"file-{i}": base64.b64encode(f.contents.encode("utf-8")).decode("ascii")
            for i, f in enumerate(files)}
    return _own({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": name}, "data": data}, labels, workflow, group)


def _workflow_objects(workflow, group, manifests, spec) -> GroupObjects:
    labels = owner_labels(workflow, group)
    mine = _copied([m for m in manifests
                    if ((m.get("metadata") or {}).get("annotations") or {})
                    .get(GROUP_NAME_ANNOTATION) == group.name])  # this group's only
    podgroup = _own(next(m for m in mine if m["kind"] == "PodGroup"), labels, workflow, group)
    pods = [_own(m, labels, workflow, group) for m in mine if m["kind"] == "Pod"]
    _rename_for_retry(pods, group.retry_id)
    group_spec = next(g for g in spec.groups if g.name == group.name)
    objects = GroupObjects(podgroup=podgroup, pods=pods)
    if len(pods) > 1:
        service = service_name(podgroup["metadata"]["name"])
        objects.service = _own({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": service},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {MANAGED_BY_LABEL: MANAGED_BY,
                                  WORKFLOW_LABEL: labels[WORKFLOW_LABEL],
                                  GROUP_LABEL: labels[GROUP_LABEL]}},
        }, labels, workflow, group)
        hosts: dict[str, str] = {}
        for pod in pods:
            _, task = task_of_pod(pod)
            host = f"{pod['metadata']['name']}.{service}"
            hosts[task] = host
            hosts.setdefault(pod["metadata"]["annotations"][TASK_NAME_ANNOTATION], host)
        for pod in pods:
            pod["spec"]["subdomain"] = service
            for container in pod["spec"]["containers"]:
                _resolve_hosts(container, hosts)
    for task_spec in group_spec.tasks:
        if not task_spec.files:
            continue
        secret = dns_label(f"{podgroup['metadata']['name']}-{task_spec.name}-files")
        objects.secrets.append(_file_secret(secret, task_spec.files, labels, workflow, group))
        for pod in pods:
            if pod["metadata"]["annotations"].get(TASK_NAME_ANNOTATION) != task_spec.name:
                continue
            pod["spec"].setdefault("volumes", []).append(
                {"name": FILES_VOLUME, "secret": {"secretName": secret,
                                                  "defaultMode": FILES_MODE}})
            mounts = pod["spec"]["containers"][0].setdefault("volumeMounts", [])
            for index, file in enumerate(task_spec.files):
                path = file.path if file.path.startswith("/") else f"/{file.path}"
                mounts.append({"name": FILES_VOLUME, "mountPath": path,
                               "subPath": f"file-{index}", "readOnly": True})
    if workflow.user_id is not None:
        add_credentials(objects, workflow, group_spec, podgroup["metadata"]["name"],
                        lambda manifest: _own(manifest, labels, workflow, group))
    return objects


def _copied(manifests: list[dict]) -> list[dict]:
    """A deep copy of JSON data, through orjson: several times faster than ``copy.deepcopy``
    (a copy per group dispatched; the caller's manifests are shared by its groups)."""
    return orjson.loads(orjson.dumps(manifests))


def _workload_objects(workflow, group) -> GroupObjects:
    labels = owner_labels(workflow, group)
    stored = _copied(workflow.manifests or [])
    podgroup = next(m for m in stored if m.get("kind") == "PodGroup"
                    and m["metadata"]["name"] == group.podgroup)
    pods = []
    for manifest in stored:
        annotations = (manifest.get("metadata") or {}).get("annotations") or {}
        if manifest.get("kind") != "Pod" or annotations.get(PODGROUP_ANNOTATION) \
                != group.podgroup:
            continue
        pod = _own(manifest, labels, workflow, group)
        pod["metadata"]["annotations"][TASK_NAME_ANNOTATION] = pod["metadata"]["name"]
        pod["metadata"]["annotations"].pop(REPLICA_INDEX_ANNOTATION, None)
        pods.append(pod)
    _rename_for_retry(pods, group.retry_id)
    return GroupObjects(podgroup=_own(podgroup, labels, workflow, group), pods=pods)


def group_objects(workflow, group, *, manifests: list[dict] | None = None,
                  spec: WorkflowSpec | None = None) -> GroupObjects:
    """The objects of ``group``. ``spec`` and ``manifests``: the workflow's stored spec and
    its ``/kai`` manifests when the caller already has them (one spec parse per workflow,
    not one per group and another for its manifests)."""
    if workflow.manifests is not None:
        objects = _workload_objects(workflow, group)
    else:
        spec = spec or stored_spec(workflow)
        if manifests is None:
            manifests = workflow_manifests(workflow, spec)
        objects = _workflow_objects(workflow, group, manifests, spec)
    for pod in objects.pods:
        pod["spec"]["schedulerName"] = settings.OSMO_SCHEDULER_NAME
        _quantities_as_strings(pod)
    if workflow.exec_timeout_seconds:
        objects.podgroup["metadata"]["annotations"][EXEC_TIMEOUT_ANNOTATION] = str(
            workflow.exec_timeout_seconds)
    return objects


def _quantities_as_strings(pod: dict[str, Any]) -> None:
    """Resource quantities as strings (``1`` → ``"1"``): the API server takes either, the
    official client only strings (a workload's manifest may say ``nvidia.com/gpu: 1``)."""
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for part in ("requests", "limits"):
            values = (container.get("resources") or {}).get(part)
            if isinstance(values, dict):
                for key, value in values.items():
                    if not isinstance(value, str):
                        values[key] = str(value)


def workflow_manifests(workflow, spec: WorkflowSpec | None = None) -> list[dict[str, Any]]:
    """A workflow's ``GET .../kai`` manifests (the PodGroups and Pods of all its groups), from
    ``spec`` when it is parsed already."""
    return manifests_for(spec=spec or stored_spec(workflow), workflow_name=workflow.name,
                         pool=workflow.pool, priority=workflow.priority)
