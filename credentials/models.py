"""A user's credential: its name, type and key names in the clear, its values sealed."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class CredentialType(models.TextChoices):
    REGISTRY = "REGISTRY"
    DATA = "DATA"
    GENERIC = "GENERIC"


class Credential(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="credentials")
    name = models.CharField(max_length=63)
    cred_type = models.CharField(max_length=8, choices=CredentialType.choices)
    # What OSMO calls the profile: a registry's host or a data endpoint, never a secret.
    profile = models.CharField(max_length=1024, blank=True, default="")
    keys = models.JSONField(default=list)  # the payload's key names, in the order given
    sealed = models.TextField()  # a Fernet token of the payload's JSON (crypto.seal)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user", "name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="credential_unique_per_user",
                                    violation_error_message="You already have a credential "
                                                            "of that name."),
            models.CheckConstraint(condition=models.Q(cred_type__in=CredentialType.values),
                                   name="credential_type_known",
                                   violation_error_message="Unknown credential type."),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.cred_type})"
