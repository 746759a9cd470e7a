"""A task's credentials on Kubernetes (OSMO's `credentials:`), added to its group's objects.

- Each credential a task uses becomes one Secret, ``{pod-group}-{task}-{credential}-cred``,
  in the workflow's namespace with the group's owner labels (the cleaner deletes it with the
  group). The dispatcher creates it before the pods, so a pod never starts without it, and
  once the pods exist makes them its owners (``ownerReferences``): the garbage collector
  deletes it with the last of them.
- REGISTRY: a ``kubernetes.io/dockerconfigjson`` Secret for the credential's scope (its
  registry host, and the repositories' path prefix when it names one), in the
  ``imagePullSecrets`` of the pods an image of which it is the most specific scope for
  (``credentials.registry_scopes``) — named in the task or not, and none for another host or
  path (OSMO matches its users' registry credentials to the images by their host the same
  way; a path narrows it).
- GENERIC and DATA: an Opaque Secret, its keys mounted as files at the path the spec gives,
  or the variables the spec maps to keys set from it (``secretKeyRef``).

Values are read (opened) here only, for the Secret's data; nothing here logs one. A group
costs one query for the registry credentials of its images' hosts, and one more when its tasks
name credentials.
"""

from __future__ import annotations

import base64
import json

from credentials.registry_scopes import (
    RegistryScope,
    image_repository,
    most_specific,
    stored_scope,
)
from credentials.selectors import payloads_for_dispatch, registry_payloads_for_dispatch
from scheduler.batch_reads import once
from scheduler.core.kai_names import TASK_NAME_ANNOTATION, dns_label

DOCKER_CONFIG_TYPE = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_KEY = ".dockerconfigjson"
VOLUME_PREFIX = "osmo-cred-"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _docker_config(host: str, payload: dict[str, str]) -> str:
    username, password = payload.get("username", ""), payload["auth"]
    return json.dumps({"auths": {host: {"username": username, "password": password,
                                        "auth": _b64(f"{username}:{password}")}}})


def _images(pod: dict) -> set[str]:
    spec = pod["spec"]
    return {container.get("image") or ""
            for container in [*(spec.get("initContainers") or []), *spec["containers"]]}


def _pulls_with(images: set[str], scoped: list[tuple[str, RegistryScope]]) -> set[str]:
    """The names of the credentials the images pull with: each image's most specific."""
    return {name for image in images for name in most_specific(scoped, image)}


def add_credentials(objects, workflow, group_spec, podgroup: str, own) -> None:
    """Add the Secrets of ``group_spec``'s tasks' credentials to ``objects`` (their owners'
    pod names in ``objects.secret_owners``) and point the pods at them. ``own`` stamps a
    manifest with the group's labels, annotations and namespace."""
    named = {name for task in group_spec.tasks for name in task.credentials}
    images = {pod["metadata"]["name"]: _images(pod) for pod in objects.pods}
    opened = payloads_for_dispatch(user_id=workflow.user_id, names=named) if named else {}
    hosts = frozenset(image_repository(image).host for pod in images.values() for image in pod)
    registries = once(("registries", workflow.user_id, hosts), lambda: (
        registry_payloads_for_dispatch(user_id=workflow.user_id, hosts=hosts)))
    scoped = [(credential.name, stored_scope(credential.profile))
              for credential, _ in registries]
    pulls = {pod: _pulls_with(pod_images, scoped) for pod, pod_images in images.items()}
    for task_spec in group_spec.tasks:
        pods = [pod for pod in objects.pods
                if pod["metadata"]["annotations"].get(TASK_NAME_ANNOTATION) == task_spec.name]
        # GENERIC and DATA as the task names them (one deleted since the submission: the pods
        # go without it); REGISTRY by its scope, named or not, as OSMO pulls.
        uses = {name: (opened[name], use, pods) for name, use in task_spec.credentials.items()
                if name in opened and opened[name][0].cred_type != "REGISTRY"}
        for credential, payload in registries:
            pulling = [pod for pod in pods if credential.name in pulls[pod["metadata"]["name"]]]
            if pulling:
                uses[credential.name] = ((credential, payload), None, pulling)
        for index, (name, ((credential, payload), use, owners)) in enumerate(
                sorted(uses.items())):
            secret = dns_label(f"{podgroup}-{task_spec.name}-{name}-cred")
            if credential.cred_type == "REGISTRY":
                body = {"type": DOCKER_CONFIG_TYPE, "data": {
                    DOCKER_CONFIG_KEY: _b64(_docker_config(credential.profile, payload))}}
            else:
                body = {"type": "Opaque",
                        "data": {key: _b64(value) for key, value in payload.items()}}
            objects.secrets.append(own({"apiVersion": "v1", "kind": "Secret",
                                        "metadata": {"name": secret}, **body}))
            objects.secret_owners[secret] = [pod["metadata"]["name"] for pod in owners]
            for pod in owners:
                _point_at(pod, secret, credential.cred_type, use, f"{VOLUME_PREFIX}{index}")


def _point_at(pod: dict, secret: str, cred_type: str, use, volume: str) -> None:
    spec = pod["spec"]
    if cred_type == "REGISTRY":
        spec.setdefault("imagePullSecrets", []).append({"name": secret})
        return
    container = spec["containers"][0]
    if isinstance(use, str):
        spec.setdefault("volumes", []).append({"name": volume,
                                               "secret": {"secretName": secret}})
        container.setdefault("volumeMounts", []).append(
            {"name": volume, "mountPath": use, "readOnly": True})
    elif use:
        container.setdefault("env", []).extend(
            {"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
            for variable, key in use.items())


def owner_references(pods: list[dict]) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
             "uid": pod["metadata"]["uid"]} for pod in pods]
