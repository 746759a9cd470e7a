"""The credentials a spec's tasks name: each must be the submitter's own (else 403, before
anything is written), used as its type allows, by keys it has (else 400)."""

from __future__ import annotations

from credentials.selectors import credentials_named
from osmo.errors import OsmoError

from .spec import WorkflowSpec


def check(*, actor, spec: WorkflowSpec) -> None:
    uses = [(task, name, use) for task in spec.tasks for name, use in task.credentials.items()]
    if not uses:
        return
    owned = credentials_named(user_id=getattr(actor, "pk", None),
                              names={name for _, name, _ in uses})
    missing = sorted({name for _, name, _ in uses if name not in owned})
    if missing:
        # One answer whether another user has such a credential or nobody does: the names
        # of other users' credentials are not told.
        raise OsmoError("credential_forbidden",
                        "A task may use only its submitter's credentials; you have none named "
                        + ", ".join(f"'{n}'" for n in missing[:5]) + ".", status_code=403,
                        errors={f"{task.path}.credentials.{name}": ["not one of yours"]
                                for task, name, _ in uses if name in missing})
    errors: dict[str, list[str]] = {}
    for task, name, use in uses:
        credential, where = owned[name], f"{task.path}.credentials.{name}"
        if credential.cred_type == "REGISTRY":
            if use is not None:
                errors[where] = ["a REGISTRY credential is used for image pulls: give it "
                                 "no mount path or variables (null)"]
        elif use is None:
            errors[where] = [f"a {credential.cred_type} credential needs a mount path or "
                             "{VARIABLE: key}"]
        elif not isinstance(use, str):
            unknown = sorted(set(use.values()) - set(credential.keys))
            if unknown:
                errors[where] = ["no such key in the credential: " + ", ".join(unknown[:5])
                                 + " (it has " + ", ".join(credential.keys[:20]) + ")"]
    if errors:
        raise OsmoError("invalid_spec", "The workflow spec is not valid: "
                        + "; ".join(f"{path}: {m[0]}" for path, m in list(errors.items())[:3]),
                        errors=errors)
