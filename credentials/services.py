"""Every write of a credential. A payload is sealed before it reaches a row, and no error
here carries a value."""

from __future__ import annotations

from django.db import transaction

from osmo.errors import NotFound

from . import crypto
from .models import Credential


@transaction.atomic
def credential_set(*, actor, name: str, cred_type: str, payload: dict[str, str],
                   profile: str = "") -> Credential:
    """Create the actor's credential ``name`` or replace it whole (OSMO's `credential set`)."""
    sealed = crypto.seal(payload)
    credential, _ = Credential.objects.select_for_update().update_or_create(
        user=actor, name=name,
        defaults={"cred_type": cred_type, "profile": profile, "keys": list(payload),
                  "sealed": sealed})
    return credential


@transaction.atomic
def credential_delete(*, actor, name: str) -> Credential:
    credential = Credential.objects.select_for_update().filter(user=actor, name=name).first()
    if credential is None:
        raise NotFound("credential_not_found", f"You have no credential named '{name}'.")
    credential.delete()
    return credential


def credentials_rotate(*, batch: int = 500) -> int:
    """Seal every row again under the first key; the count of rows. Each batch commits on its
    own, so a long rotation holds no lock on the whole table."""
    done, last = 0, 0
    while True:
        with transaction.atomic():
            rows = list(Credential.objects.select_for_update().filter(pk__gt=last)
                        .order_by("pk")[:batch])
            for row in rows:
                row.sealed = crypto.reseal(row.sealed)
            Credential.objects.bulk_update(rows, ["sealed"])
        if not rows:
            return done
        done += len(rows)
        last = rows[-1].pk
