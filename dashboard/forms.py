"""Admin forms: shape only. The valid path calls a pools service, so a dashboard edit obeys the
same rules (and writes the same audit event) as the API; a refused change shows the service's
own message on the field it is about."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.utils.safestring import mark_safe

from osmo.accounts.models import AccessToken
from osmo.accounts.services import token_digest
from osmo.errors import OsmoError
from osmo.serializers import INT32_MAX
from pools import services
from pools.models import Pool
from workflows.models import WorkflowStatus

from .presenters import NODE_STATES

QUOTA_HELP = "Whole GPUs guaranteed to the subpool, taken from the parent's unallocated share."


class ServiceForm(forms.Form):
    # OsmoError code → the field its message belongs to (others are form-wide errors).
    error_fields: dict[str, str] = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.service_error: OsmoError | None = None
        for name, field in self.fields.items():
            if isinstance(field, forms.IntegerField):
                # Integer fields get a numeric keypad on phones, without the spinner's quirks.
                field.widget.attrs.setdefault("inputmode", "numeric")
            field.widget.attrs.setdefault("autocomplete", "off")
            if name == "name":
                field.widget.attrs.setdefault("spellcheck", "false")

    def run(self, call):
        """Call the service; on a domain error, record it on the form and return None."""
        try:
            return call()
        except OsmoError as error:
            self.service_error = error
            self.add_error(self.error_fields.get(error.code), error.detail)
            return None

    @property
    def status_code(self) -> int:
        """What a re-rendered form answers: the service's status, else 400."""
        return self.service_error.status_code if self.service_error else 400


class SubpoolCreateForm(ServiceForm):
    name = forms.CharField(
        label="Subpool name", max_length=40,
        help_text="Lowercase letters, digits and '-', never '--'. The canonical name is "
                  "{parent}--{name}. An ARCHIVED name is reactivated.")
    quota_gpus = forms.IntegerField(label="Quota (GPUs)", min_value=0, max_value=INT32_MAX,
                                    help_text=QUOTA_HELP)
    error_fields = {"invalid_name": "name", "subpool_exists": "name",
                    "invalid_quota": "quota_gpus", "quota_exceeds_parent": "quota_gpus"}

    def save(self, *, actor, parent: Pool):
        return self.run(lambda: services.subpool_create(
            actor=actor, parent=parent, subpool_name=self.cleaned_data["name"],
            quota_gpus=self.cleaned_data["quota_gpus"]))


class SubpoolQuotaForm(ServiceForm):
    quota_gpus = forms.IntegerField(
        label="New quota (GPUs)", min_value=0, max_value=INT32_MAX,
        help_text="Decreases are soft: running work continues and Available may go negative "
                  "until it drains.")
    error_fields = {"invalid_quota": "quota_gpus", "quota_exceeds_parent": "quota_gpus"}

    def save(self, *, actor, subpool: Pool):
        done = self.run(lambda: services.subpool_update(
            actor=actor, subpool=subpool, quota_gpus=self.cleaned_data["quota_gpus"]) or True)
        return done is not None


class SubpoolDeleteForm(ServiceForm):
    """A confirmation: no fields, the CSRF token is the point."""

    def save(self, *, actor, subpool: Pool):
        return self.run(lambda: services.subpool_delete(actor=actor, subpool=subpool))


class PasswordLoginForm(AuthenticationForm):
    """Django's sign-in form, second on the page: the access-token form above takes the focus."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.pop("autofocus", None)


class TokenLoginForm(forms.Form):
    """Sign in with a personal access token (what `osmo standalone` prints): the session gets the
    token user's roles, no more than the token itself grants through the API."""

    token = forms.CharField(label="Access token", strip=True,
                            widget=forms.PasswordInput(attrs={"autocomplete": "off",
                                                               "autofocus": True}),
                            help_text=mark_safe(
                                "The token <code>osmo standalone</code> printed, or one from "
                                "<code>osmo token create</code> or "
                                "<code>manage.py issue_token</code>."))

    def clean_token(self):
        access = (AccessToken.objects.select_related("user")
                  .filter(digest=token_digest(self.cleaned_data["token"]),
                          revoked_at__isnull=True).first())
        if access is None or not access.user.is_active:
            raise forms.ValidationError("This token is not valid (or was revoked).")
        self.user = access.user
        self.access = access
        return self.cleaned_data["token"]

    def get_user(self):
        return self.user


class ClusterFilterForm(forms.Form):
    """The cluster page's filters (GET): every field optional, unknown values refused."""

    zone = forms.CharField(required=False, max_length=63)
    rack = forms.CharField(required=False, max_length=63)
    state = forms.ChoiceField(required=False, choices=[("", "any state"),
                                                       *((s, s) for s in NODE_STATES)])
    node = forms.CharField(required=False, max_length=253, label="Node name contains")
    backend = forms.CharField(required=False, max_length=63)
    tables = forms.BooleanField(required=False, label="Node tables")
    hours = forms.IntegerField(required=False, min_value=1, max_value=48, initial=6,
                               label="Usage chart hours")


class WorkflowFilterForm(forms.Form):
    """The workflow list's filters (GET)."""

    status = forms.MultipleChoiceField(required=False, choices=WorkflowStatus.choices)
    pool = forms.CharField(required=False, max_length=82)
    user = forms.CharField(required=False, max_length=150)
    q = forms.CharField(required=False, max_length=63, label="Name contains")
    page = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1)
