"""What the Kubernetes API server validates in the objects we send it, checked at admission.

A value that reaches a Pod, Secret or label unchanged must pass the API server's own validation
(Kubernetes v1.25 ``apimachinery/pkg/util/validation`` and ``core/validation``), or the group
fails only at dispatch with a 422. These are those rules, written from the Kubernetes
documentation; each returns the problems (empty when the value is fine), worded for a user.
Pure: the workflow spec parser and the workload admission both use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_VAR_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"
                       r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)))?$")

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
SECRET_MAX_BYTES = 1024 * 1024  # the sum of a Secret's data values
PROTOCOLS = ("TCP", "UDP", "SCTP")


def dns_label(value: str) -> list[str]:
    if len(value) > DNS_LABEL_MAX:
        return [f"'{value}' is longer than {DNS_LABEL_MAX} characters"]
    if not _DNS_LABEL.match(value):
        return [f"'{value}' is not a DNS label (lowercase letters, digits and '-', starting "
                f"and ending with a letter or digit)"]
    return []


def dns_subdomain(value: str) -> list[str]:
    if len(value) > DNS_SUBDOMAIN_MAX:
        return [f"'{value}' is longer than {DNS_SUBDOMAIN_MAX} characters"]
    if not _DNS_SUBDOMAIN.match(value):
        return [f"'{value}' is not a DNS subdomain (lowercase letters, digits, '-' and '.', "
                f"starting and ending with a letter or digit)"]
    return []


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: an optional DNS-subdomain prefix and '/', then a name."""
    prefix, slash, name = value.rpartition("/")
    problems = []
    if slash:
        if not prefix:
            problems.append(f"'{value}': the prefix before '/' must not be empty")
        else:
            problems += [f"prefix of '{value}': {p}" for p in dns_subdomain(prefix)]
    if not name:
        problems.append(f"'{value}': the name part must not be empty")
    elif len(name) > DNS_LABEL_MAX:
        problems.append(f"'{value}': the name part is longer than {DNS_LABEL_MAX} characters")
    elif not _QUALIFIED_NAME.match(name):
        problems.append(f"'{value}' is not a valid key (letters, digits, '-', '_' and '.', "
                        f"starting and ending with a letter or digit, optionally prefixed "
                        f"by a DNS subdomain and '/')")
    return problems


def label_value(value: str) -> list[str]:
    if len(value) > DNS_LABEL_MAX:
        return [f"'{value}' is longer than {DNS_LABEL_MAX} characters"]
    if not _LABEL_VALUE.match(value):
        return [f"'{value}' is not a valid label value (letters, digits, '-', '_' and '.', "
                f"starting and ending with a letter or digit, or empty)"]
    return []


def env_var_name(value: str) -> list[str]:
    if not _ENV_VAR_NAME.match(value):
        return [f"'{value}' is not a valid environment variable name (letters, digits, '_', "
                f"'-' and '.', not starting with a digit)"]
    if value in (".", "..") or value.startswith(".."):
        return [f"'{value}' is not a valid environment variable name (must not be '.' or "
                f"start with '..')"]
    return []


def image(value: str) -> list[str]:
    if not value:
        return ["required: a container image"]
    if value != value.strip():
        return [f"'{value}' must not have leading or trailing whitespace"]
    return []


def port_number(value: object) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return [f"must be a port number between 1 and 65535, got {value!r}"]
    return []


def quantity(value: object) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return [f"{value!r} is not a quantity"]
    text = str(value)
    if not _QUANTITY.match(text):
        return [f"'{text}' is not a quantity (e.g. 4Gi, 512Mi, 500m, 2)"]
    if text.startswith("-"):
        return [f"'{text}' must not be negative"]
    return []


def mount_paths(paths: list[str]) -> dict[int, list[str]]:
    """Problems of a container's mount paths by index: required, and unique."""
    problems: dict[int, list[str]] = {}
    seen: set[str] = set()
    for index, path in enumerate(paths):
        if not path:
            problems.setdefault(index, []).append("required: where the file is mounted")
        elif path in seen:
            problems.setdefault(index, []).append(f"'{path}' is mounted twice (mount paths "
                                                  f"must be unique)")
        seen.add(path)
    return problems


# --- a pod spec or pod template, as a workload submits it ----------------------------------

def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def check_metadata(metadata: object, path: str) -> Iterator[tuple[str, str]]:
    if not isinstance(metadata, Mapping):
        return
    name = metadata.get("name")
    if isinstance(name, str) and name:
        for problem in dns_subdomain(name):
            yield _at(path, "name"), problem
    for field in ("labels", "annotations"):
        entries = metadata.get(field)
        if not isinstance(entries, Mapping):
            continue
        for key, value in entries.items():
            where = _at(_at(path, field), str(key))
            for problem in qualified_name(str(key)):
                yield where, problem
            if field == "labels":
                if not isinstance(value, str):
                    yield where, f"must be a string, got {value!r}"
                else:
                    for problem in label_value(value):
                        yield where, problem


def check_container(container: object, path: str) -> Iterator[tuple[str, str]]:
    if not isinstance(container, Mapping):
        return
    name = container.get("name")
    if not isinstance(name, str) or not name:
        yield _at(path, "name"), "required: a container name"
    else:
        for problem in dns_label(name):
            yield _at(path, "name"), problem
    if "image" in container:
        img = container.get("image")
        for problem in image(img if isinstance(img, str) else ""):
            yield _at(path, "image"), problem
    for index, variable in enumerate(container.get("env") or []):
        if isinstance(variable, Mapping):
            env_name = variable.get("name")
            for problem in env_var_name(env_name if isinstance(env_name, str) else ""):
                yield _at(_at(_at(path, "env"), index), "name"), problem
    port_names: set[str] = set()
    for index, port in enumerate(container.get("ports") or []):
        if not isinstance(port, Mapping):
            continue
        where = _at(_at(path, "ports"), index)
        for problem in port_number(port.get("containerPort")):
            yield _at(where, "containerPort"), problem
        if "hostPort" in port and port["hostPort"] not in (0, None):
            for problem in port_number(port["hostPort"]):
                yield _at(where, "hostPort"), problem
        if port.get("protocol") is not None and port["protocol"] not in PROTOCOLS:
            yield _at(where, "protocol"), f"must be one of {', '.join(PROTOCOLS)}"
        port_name = port.get("name")
        if isinstance(port_name, str) and port_name:
            if len(port_name) > 15 or not _PORT_NAME.match(port_name) or \
                    not re.search(r"[a-z]", port_name):
                yield _at(where, "name"), (f"'{port_name}' is not a port name (at most 15 "
                                           f"lowercase letters, digits and '-', with a letter)")
            elif port_name in port_names:
                yield _at(where, "name"), f"'{port_name}' is used twice"
            port_names.add(port_name)
    resources = container.get("resources")
    if isinstance(resources, Mapping):
        for part in ("requests", "limits"):
            values = resources.get(part)
            if not isinstance(values, Mapping):
                continue
            for key, value in values.items():
                where = _at(_at(_at(path, "resources"), part), str(key))
                for problem in qualified_name(str(key)):
                    yield where, problem
                for problem in quantity(value):
                    yield where, problem


def check_pod_spec(spec: object, path: str) -> Iterator[tuple[str, str]]:
    if not isinstance(spec, Mapping):
        return
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(field) or []):
            where = _at(_at(path, field), index)
            yield from check_container(container, where)
            name = container.get("name") if isinstance(container, Mapping) else None
            if isinstance(name, str) and name:
                if name in names:
                    yield _at(where, "name"), f"'{name}' is used by two containers"
                names.add(name)
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping):
        for key, value in selector.items():
            where = _at(_at(path, "nodeSelector"), str(key))
            for problem in qualified_name(str(key)) + label_value(str(value)):
                yield where, problem


def check_workload(obj: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Every object's metadata and every pod spec / pod template found inside ``obj`` (a Job's
    ``spec.template``, an MPIJob's replica specs, a List's items, ...)."""
    if isinstance(obj, Mapping):
        if isinstance(obj.get("containers"), list):
            yield from check_pod_spec(obj, path)
            return
        if "metadata" in obj:
            yield from check_metadata(obj["metadata"], _at(path, "metadata"))
        for key, value in obj.items():
            if key != "metadata":
                yield from check_workload(value, _at(path, str(key)))
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            yield from check_workload(item, _at(path, index))


def secret_size(contents: list[str]) -> list[str]:
    total = sum(len(text.encode("utf-8")) for text in contents)
    if total > SECRET_MAX_BYTES:
        return [f"the task's files are {total} bytes together; at most {SECRET_MAX_BYTES} "
                f"(1 MiB, a Kubernetes Secret's limit)"]
    return []

