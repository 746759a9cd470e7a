from django.conf import settings
from django.db import models
from django.utils import timezone


class AccessTokenQuerySet(models.QuerySet):
    def live(self):
        """Neither revoked nor expired."""
        return self.filter(models.Q(expires_at__isnull=True)
                           | models.Q(expires_at__gt=timezone.now()), revoked_at__isnull=True)


class AccessToken(models.Model):
    """A personal access token; only the SHA-256 digest of the raw token is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="access_tokens")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="First characters, to tell tokens apart.")
    name = models.CharField(max_length=100, blank=True, default="",
                            help_text="What its owner calls it (e.g. `laptop`, `ci`).")
    description = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True,
                                      help_text="After this it no longer signs in (null: never).")
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = AccessTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(digest__regex=r"^[0-9a-f]{64}$"),
                name="accesstoken_digest_is_sha256",
                violation_error_message="The digest must be a SHA-256 hex digest.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class UserProfile(models.Model):
    """Per-user settings the OSMO client reads and sets (`GET/POST /api/profile/settings`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="osmo_profile")
    # Pools are archived, never deleted; SET_NULL only guards a manual deletion.
    default_pool = models.ForeignKey("pools.Pool", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+",
                                     help_text="Where submissions without a pool go.")
    # A message when one of the user's workflows ends (workflows/notifications.py).
    email_notification = models.BooleanField(default=False)
    email_address = models.EmailField(blank=True, default="",
                                      help_text="Where the email goes; empty: the user's email.")
    slack_notification = models.BooleanField(default=False)
    slack_webhook_url = models.URLField(max_length=500, blank=True, default="",
                                        help_text="A Slack incoming webhook; never shown back.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"profile of {self.user}"


class StreamLease(models.Model):
    """A long response (a followed log) a user holds, in whichever web process serves it: the
    per-user bound counts these rows, so it holds across processes. A row its process left
    behind (killed) stops counting once it is not renewed for a while."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    renewed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "renewed_at"], name="streamlease_user_renewed")]

    def __str__(self) -> str:
        return f"stream of {self.user_id} (renewed {self.renewed_at})"
