"""Validate manifests against the KAI CRDs' ``openAPIV3Schema`` with jsonschema.

The CRD files are read from a directory passed in, else ``$OSMO_KAI_CRDS_DIR``; only the
top-level ``*.yaml`` files count (older snapshots in subdirectories are ignored).

Kubernetes extensions, handled as the API server would where it can be done offline:

- ``x-kubernetes-int-or-string``: integer or string (added as ``anyOf`` when missing).
- ``nullable: true``: null is accepted.
- ``format: int32`` / ``int64``: range-checked.
- Unknown fields: the API server silently prunes them; with ``strict=True`` (default) they are
  reported, like ``kubectl --validate=strict``, because a dropped field (seed 001's plural
  ``topologyConstraints``, a typo) silently changes what gets scheduled.
  ``x-kubernetes-preserve-unknown-fields`` and ``metadata`` (ObjectMeta) are exempt.
- ``x-kubernetes-validations`` (CEL) and ``x-kubernetes-list-type``/``map-type`` are not
  evaluated (no CEL engine here); the webhook rules cover what matters for PodGroups.

Messages read ``<path>: <problem>`` with paths like ``spec.subGroups[0].name``.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from osmo import bootstrap

ENV_VAR = bootstrap.KAI_CRDS_DIR
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()
    for name, (low, high) in _INT_RANGES.items():
        def check(value: object, low: int = low, high: int = high) -> bool:
            if isinstance(value, bool) or not isinstance(value, int):
                return True  # the type keyword reports non-integers
            return low <= value <= high
        checker.checks(name)(check)
    return checker


def _to_json_schema(schema: Any) -> Any:
    """Rewrite the Kubernetes extensions into plain JSON Schema (a deep copy)."""
    if isinstance(schema, list):
        return [_to_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _to_json_schema(value) for key, value in schema.items()
           if not key.startswith("x-kubernetes-") and key != "nullable"}
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else \
            [*out["type"], "null"]
    return out


def resolve_crds_dir(crds_dir: str | os.PathLike[str] | None = None) -> Path:
    chosen = crds_dir if crds_dir is not None else bootstrap.kai_crds_dir()
    if not chosen:
        raise FileNotFoundError(f"no KAI CRD directory: pass one or set {ENV_VAR}")
    path = Path(chosen)
    if not path.is_dir():
        raise FileNotFoundError(f"KAI CRD directory {path} does not exist")
    return path


@functools.lru_cache(maxsize=8)
def _load(directory: str) -> dict[tuple[str, str], dict[str, Any]]:
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for file in sorted(Path(directory).glob("*.yaml")):
        with file.open(encoding="utf-8") as handle:
            for document in yaml.safe_load_all(handle):
                if not isinstance(document, dict) or \
                        document.get("kind") != "CustomResourceDefinition":
                    continue
                spec = document["spec"]
                group, kind = spec["group"], spec["names"]["kind"]
                for version in spec.get("versions", []):
                    raw = (version.get("schema") or {}).get("openAPIV3Schema")
                    if raw is not None:
                        schemas[(f"{group}/{version['name']}", kind)] = raw
    return schemas


def load_crd_schemas(crds_dir: str | os.PathLike[str] | None = None
                     ) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → the CRD's raw ``openAPIV3Schema`` (cached per directory)."""
    return copy.deepcopy(_load(str(resolve_crds_dir(crds_dir).resolve())))


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _unknown_fields(value: Any, schema: Mapping[str, Any], path: str, found: list[str]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and schema.get("type") == "object":
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child_path = f"{path}.{key}" if path else str(key)
            if properties is not None and key in properties:
                if child_path != "metadata":
                    _unknown_fields(item, properties[key], child_path, found)
            elif isinstance(additional, Mapping):
                _unknown_fields(item, additional, child_path, found)
            elif properties is not None and additional is None:
                found.append(f"{child_path}: unknown field \"{key}\" (the API server would "
                             "drop it)")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _unknown_fields(item, schema["items"], f"{path}[{index}]", found)


def validate_manifest(
    manifest: Mapping[str, Any],
    *,
    crds_dir: str | os.PathLike[str] | None = None,
    schemas: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    strict: bool = True,
) -> list[str]:
    """Error messages for ``manifest`` against its CRD schema; ``[]`` when valid."""
    if not isinstance(manifest, Mapping):
        return ["manifest must be an object"]
    known = schemas if schemas is not None else load_crd_schemas(crds_dir)
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    raw = known.get(key)  # type: ignore[arg-type]
    if raw is None:
        return [f"no CRD schema for apiVersion {key[0]!r}, kind {key[1]!r}"]
    errors: list[str] = []
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping) or not (metadata.get("name")
                                                 or metadata.get("generateName")):
        errors.append("metadata.name: required")
    validator = jsonschema.Draft7Validator(_to_json_schema(raw), format_checker=_format_checker())
    for error in sorted(validator.iter_errors(dict(manifest)),
                        key=lambda e: (_path(e.absolute_path), e.message)):
        where = _path(error.absolute_path) or "<root>"
        errors.append(f"{where}: {error.message}")
    if strict:
        _unknown_fields(dict(manifest), raw, "", errors)
    return errors
