"""A message to the submitter when a workflow ends (OSMO's profile `email_notification` and
`slack_notification`): its status, its duration and its dashboard link.

The state machine only asks, after its transaction commits, for one Celery job per channel
the user turned on (:func:`enqueue_on_commit`); the worker sends (`workflows.tasks`). Nothing
here can delay or fail a status change: a broker that is down, a broken SMTP server or webhook
is logged and counted (`osmo_notifications_total`), and a failed delivery is retried with
backoff, then given up. A webhook posts only to a host of ``OSMO_NOTIFY_WEBHOOK_HOSTS``
(checked when it is set and again when it is used) and follows no redirect.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from osmo import webhook_hosts
from osmo.accounts.models import UserProfile

from .api.serializers import overview_url
from .metrics import NOTIFICATIONS
from .models import Workflow

log = logging.getLogger("osmo.notifications")

TASK = "workflows.tasks.workflow_notify"


class DeliveryError(Exception):
    """One attempt failed (the worker retries)."""


@dataclass(frozen=True)
class Message:
    subject: str
    text: str


def enqueue_on_commit(workflow_ids: Iterable[int]) -> None:
    """The workflows ended in the current transaction: once it commits, queue a job for
    each channel their users turned on."""
    ids = sorted(set(workflow_ids))
    if ids:
        transaction.on_commit(lambda: _enqueue(ids))


def _enqueue(workflow_ids: list[int]) -> None:
    try:
        rows = list(Workflow.objects.filter(pk__in=workflow_ids).values_list(
            "pk", "user__osmo_profile__email_notification",
            "user__osmo_profile__slack_notification"))
    except Exception:  # noqa: BLE001 - a status change must never fail for a message
        log.exception("notifications: could not read the profiles of workflows %s",
                      workflow_ids)
        return
    for workflow_id, email, slack in rows:
        for channel in [c for c, on in (("email", email), ("slack", slack)) if on]:
            try:
                # By name: the task's module (workflows.tasks) imports this one.
                current_app.send_task(TASK, args=[workflow_id, channel])
            except Exception as exc:  # noqa: BLE001 - the broker is down: logged, counted
                NOTIFICATIONS.labels(channel, "not_queued").inc()
                log.warning("notifications: %s for workflow %s not queued: %s", channel,
                            workflow_id, exc)


def message(workflow: Workflow) -> Message:
    began = workflow.started_at or workflow.submitted_at
    seconds = int((workflow.finished_at - began).total_seconds()) if (
        workflow.finished_at and began) else 0
    duration = f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"
    reason = f" ({workflow.reason})" if workflow.reason else ""
    subject = f"OSMO workflow {workflow.name} {workflow.status}"
    text = (f"Workflow {workflow.name} ended {workflow.status}{reason} in pool "
            f"{workflow.pool.name}.\nDuration: {duration}\n"
            f"Dashboard: {overview_url(workflow.name)}\n")
    return Message(subject, text)


def deliver(workflow_id: int, channel: str) -> bool:
    """Send one channel's message for an ended workflow; False when there is nothing to send
    (the setting was turned off meanwhile). Raises DeliveryError on a failed attempt."""
    workflow = Workflow.objects.select_related("pool", "user").filter(pk=workflow_id).first()
    profile = UserProfile.objects.filter(user_id=workflow.user_id).first() if (
        workflow and workflow.user_id) else None
    if profile is None:
        return False
    text = message(workflow)
    try:
        if channel == "email" and profile.email_notification:
            address = profile.email_address or workflow.user.email
            send_mail(text.subject, text.text, None, [address],
                      fail_silently=False)
        elif channel == "slack" and profile.slack_notification:
            why = webhook_hosts.refusal(profile.slack_webhook_url,
                                        settings.OSMO_NOTIFY_WEBHOOK_HOSTS)
            if why is not None:  # allowed when set, no longer: refused, never retried
                NOTIFICATIONS.labels(channel, "refused").inc()
                log.warning("notifications: slack for workflow %s not sent: the webhook %s",
                            workflow.name, why)
                return False
            _post_webhook(profile.slack_webhook_url, {"text": f"*{text.subject}*\n{text.text}"})
        else:
            return False
    except (OSError, urllib.error.URLError, ValueError) as exc:
        NOTIFICATIONS.labels(channel, "failed").inc()
        # The webhook's URL is the user's secret: the log names the workflow and the error.
        raise DeliveryError(f"{channel} for workflow {workflow.name}: "
                            f"{type(exc).__name__}") from None
    NOTIFICATIONS.labels(channel, "sent").inc()
    return True


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook that answers with a redirect is not followed: the next address is not one
    the allow-list checked."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, "a redirect is not followed", headers,
                                     fp)


_OPENER = urllib.request.build_opener(_NoRedirects)


def _post_webhook(url: str, body: dict) -> None:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with _OPENER.open(request, timeout=settings.EMAIL_TIMEOUT) as response:
        if not 200 <= response.status < 300:
            raise OSError(f"webhook answered {response.status}")
