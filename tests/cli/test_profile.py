"""`osmo profile list|set` against a live server: the default pool and the notifications."""

from __future__ import annotations

import json

import pytest

from osmo.accounts.models import UserProfile
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

WEBHOOK = "https://hooks.slack.com/services/T0/B0/secret-part"


def test_profile_set_notifications_and_list(cli, monkeypatch):
    factories.pool("team", 4)
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    code, _, err = cli("profile", "set", "notifications", "email", "true")
    assert code == 1 and "Email notifications need an address" in err
    assert not UserProfile.objects.filter(user__username="alice",
                                          email_notification=True).exists()
    code, out, _ = cli("profile", "set", "notifications", "email", "true",
                       "--address", "alice@example.com")
    assert code == 0 and "Email notifications: on (alice@example.com)" in out
    code, out, _ = cli("profile", "set", "notifications", "slack", "true", "--webhook", WEBHOOK)
    assert code == 0 and "Slack notifications: on (webhook set)" in out
    assert WEBHOOK not in out
    assert cli("profile", "set", "pool", "team")[0] == 0
    body = json.loads(cli("profile", "list", "-t", "json")[1])
    assert body["profile"] == {"username": "alice", "email_notification": True,
                               "slack_notification": True, "email": "alice@example.com",
                               "slack_webhook_set": True, "pool": "team"}
    code, out, _ = cli("profile", "set", "notifications", "slack", "false")
    assert code == 0 and "Slack notifications: off (webhook set)" in out
    profile = UserProfile.objects.get(user__username="alice")
    assert (profile.email_notification, profile.slack_notification,
            profile.slack_webhook_url) == (True, False, WEBHOOK)
