"""The notification settings of `/api/profile/settings`: bad input is a 400 in the contract's
shape and changes nothing; the webhook is never shown back."""

from __future__ import annotations

import json

import pytest

from osmo.accounts.models import UserProfile

pytestmark = pytest.mark.django_db

WEBHOOK = "https://hooks.slack.com/services/T0/B0/hidden-part"


def stored(user) -> tuple | None:
    return UserProfile.objects.filter(user=user.user).values_list(
        "email_notification", "email_address", "slack_notification", "slack_webhook_url",
        "default_pool").first()


@pytest.mark.parametrize("body, field", [
    ({"email_notification": True}, "email"),
    ({"slack_notification": True}, "slack_webhook"),
    ({"slack_notification": True, "slack_webhook": "ftp://x.example/y"}, "slack_webhook"),
    ({"slack_webhook": "not a url"}, "slack_webhook"),
    ({"slack_webhook": "https://x.example/" + "a" * 500}, "slack_webhook"),
    ({"email": "nobody"}, "email"),
    ({"email_notification": "yes"}, "email_notification"),
    ({"pool": "team", "slack_notification": True}, "slack_webhook"),  # all or nothing
])
def test_bad_notification_settings_are_refused(team, user, body, field):
    before = stored(user)
    response = user.post("/api/profile/settings", body, format="json")
    assert response.status_code == 400, response.json()
    got = response.json()
    assert got["code"] == "invalid_request" and field in got["errors"]
    assert stored(user) == before


def test_settings_are_kept_and_the_webhook_is_never_shown(team, user):
    response = user.post("/api/profile/settings", {
        "slack_notification": True, "slack_webhook": WEBHOOK, "email": "ml@example.com",
        "email_notification": True}, format="json")
    assert response.status_code == 200, response.json()
    for body in (response.json(), user.get("/api/profile/settings").json()):
        assert body["profile"] == {"username": "ml-user", "email_notification": True,
                                   "slack_notification": True, "email": "ml@example.com",
                                   "slack_webhook_set": True, "pool": None}
        assert "hidden-part" not in json.dumps(body)
    assert stored(user) == (True, "ml@example.com", True, WEBHOOK, None)
    user.post("/api/profile/settings", {"email_notification": False}, format="json")
    assert stored(user) == (False, "ml@example.com", True, WEBHOOK, None)


@pytest.mark.parametrize("url, words", [
    ("https://169.254.169.254/latest/meta-data", "posts to 169.254.169.254, which is not an "
                                                 "allowed webhook host"),
    ("http://localhost:8000/admin/hidden-part", "posts to localhost:8000, which is not an "
                                                "allowed webhook host"),
    ("https://hooks.slack.com:8443/services/hidden-part", "posts to hooks.slack.com:8443, "
                                                          "which is not an allowed webhook host"),
    ("https://evil.hooks.slack.com/services/hidden-part", "posts to evil.hooks.slack.com, "
                                                          "which is not an allowed webhook host"),
    ("https://me:pw@hooks.slack.com/services/hidden-part", "must not carry a user name or "
                                                           "password"),
])
def test_a_webhook_outside_the_allowed_hosts_is_refused_at_submission(team, user, url, words):
    before = stored(user)
    response = user.post("/api/profile/settings", {"slack_notification": True,
                                                   "slack_webhook": url}, format="json")
    assert response.status_code == 400
    got = response.json()
    assert (got["code"], got["errors"]) == ("invalid_request",
                                            {"slack_webhook": [f"The webhook {words}."]})
    assert "hidden-part" not in response.content.decode()
    assert stored(user) == before


def test_the_admin_s_allowed_hosts_decide(team, user, settings):
    settings.OSMO_NOTIFY_WEBHOOK_HOSTS = ["chat.example.org:8443", "hooks.example.net"]
    for url in ("https://chat.example.org:8443/hook", "http://hooks.example.net/x"):
        response = user.post("/api/profile/settings", {"slack_webhook": url}, format="json")
        assert response.status_code == 200, response.json()
        assert stored(user)[3] == url
    response = user.post("/api/profile/settings", {"slack_webhook": WEBHOOK}, format="json")
    assert response.status_code == 400
    assert stored(user)[3] == "http://hooks.example.net/x"
