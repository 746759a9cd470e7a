"""Dashboard pages: shape and permissions only; reads from dashboard.queries, writes through
the forms (which call pools.services).

Every page has a fragment twin (`.../fragment/`) with its live figures, which the page's script
re-fetches every few seconds; without JavaScript the pages are complete, just not live.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_safe

from osmo.accounts.roles import roles_for
from osmo.accounts.sessions import TOKEN_REVOKED, session_bind_token, session_ended_reason
from osmo.errors import NotFound, OsmoError
from pools import quota
from pools import selectors as pool_selectors
from pools.models import Pool, SubpoolState
from scheduler import selectors as scheduler_selectors
from workflows import lifecycle
from workflows import selectors as workflow_selectors
from workflows.models import WorkflowStatus

from . import forms, queries
from .paging import bounded_page
from .presenters import ClusterFilter, duration, filter_zones, workflow_groups

WORKFLOWS_PER_PAGE = 50

REFRESH_SECONDS = 5

FAVICON = (Path(__file__).parent / "static" / "dashboard" / "favicon.ico").read_bytes()


def _error(request, status: int, title: str, message: str):
    return render(request, "dashboard/error.html", {"title": title, "message": message},
                  status=status)


def _not_found(request, error: NotFound):
    return _error(request, 404, "Not found", error.detail)


def _forbidden(request, pool_name: str):
    return _error(request, 403, "Not allowed",
                  f"Only admins of pool '{pool_name}' (osmo-{pool_name}-admin) can manage its "
                  f"subpools.")


def _pool_url(name: str) -> str:
    return reverse("dashboard:pool", args=[name])


@require_safe
def favicon(request):
    """Browsers ask every page's site for /favicon.ico: the dashboard's icon, cached a day."""
    response = HttpResponse(FAVICON, content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


# --- signing in with a token ------------------------------------------------------------------

ENDED_WORDS = {TOKEN_REVOKED: "Your session ended: its token was revoked. Sign in again "
                              "with a token that is still valid."}


class SignInView(auth_views.LoginView):
    """The sign-in page; it says why the last session ended, once, when it was ended for the
    caller (a revoked token)."""

    template_name = "dashboard/login.html"
    redirect_authenticated_user = True
    next_page = "/"
    authentication_form = forms.PasswordLoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.setdefault("token_form", forms.TokenLoginForm(auto_id="token-%s"))
        if self.request.method == "GET":
            context["session_ended"] = ENDED_WORDS.get(session_ended_reason(self.request) or "")
        return context


@require_http_methods(["POST"])
def token_login(request):
    form = forms.TokenLoginForm(request.POST)
    next_url = request.POST.get("next") or ""
    if form.is_valid():
        auth_login(request, form.get_user(),
                   backend="django.contrib.auth.backends.ModelBackend")
        session_bind_token(request, form.access)
        safe = url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure())
        return redirect(next_url if safe else reverse("dashboard:pools"))
    return render(request, "dashboard/login.html",
                  {"form": forms.PasswordLoginForm(request), "token_form": form,
                   "next": next_url},
                  status=400)


# --- the pool tree ---------------------------------------------------------------------------

@login_required
@require_GET
def pools(request):
    hierarchy = queries.pool_hierarchy(roles=roles_for(request.user))
    return render(request, "dashboard/pools.html",
                  {"hierarchy": hierarchy, "refresh_seconds": REFRESH_SECONDS})


@login_required
@require_GET
def pools_fragment(request):
    hierarchy = queries.pool_hierarchy(roles=roles_for(request.user))
    return render(request, "dashboard/_pool_tree.html", {"hierarchy": hierarchy})


# --- one pool --------------------------------------------------------------------------------

def _page_context(request, name: str) -> dict:
    page = queries.pool_page(roles=roles_for(request.user), name=name)
    return {"page": page, "parent": page.parent, "subpool": page.subpool,
            "workflows": queries.pool_workflows(page)}


@login_required
@require_GET
def pool(request, name: str):
    try:
        context = _page_context(request, name)
    except NotFound as error:
        return _not_found(request, error)
    context.update(history=queries.pool_events(context["page"]), refresh_seconds=REFRESH_SECONDS)
    if context["page"].can_admin:
        context["create_form"] = forms.SubpoolCreateForm(auto_id="create-%s")
    return render(request, "dashboard/pool.html", context)


@login_required
@require_GET
def pool_revision(request, name: str, revision: int):
    """One revision of the pool's config: who changed what, field by field."""
    try:
        page = queries.pool_page(roles=roles_for(request.user), name=name)
        view = queries.pool_revision(page, revision)
    except NotFound as error:
        return _not_found(request, error)
    return render(request, "dashboard/pool_revision.html",
                  {"page": page, "parent": page.parent, "subpool": page.subpool,
                   "revision": view})


@login_required
@require_GET
def pool_fragment(request, name: str):
    try:
        context = _page_context(request, name)
    except NotFound as error:
        return _not_found(request, error)
    return render(request, "dashboard/_pool_live.html", context)


@login_required
@require_GET
def workflow(request, name: str):
    """A workflow's page (the `overview` link the API hands out): status, groups and tasks
    with nodes, times and durations, why pending groups wait, who preempted what, and Cancel
    for those allowed; the same visibility as `GET /api/workflow/{name}`."""
    roles = roles_for(request.user)
    try:
        found = workflow_selectors.workflow_get(name=name, roles=roles, user=request.user)
    except NotFound as error:
        return _not_found(request, error)
    alive = found.status in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING)
    return render(request, "dashboard/workflow.html", {
        "workflow": found,
        "groups": workflow_groups(found, scheduler_selectors.explain(found), timezone.now()),
        "duration": duration(found.started_at, found.finished_at or (
            timezone.now() if found.started_at else None)),
        "can_cancel": alive and workflow_selectors.can_cancel(workflow=found, roles=roles,
                                                              user=request.user),
        "timeline": queries.workflow_timeline(found), "logs": queries.task_logs(found),
        "tail_lines": queries.TAIL_LINES})


@login_required
@require_http_methods(["GET", "POST"])
def workflow_cancel(request, name: str):
    """GET asks for confirmation (what canceling stops and releases); the confirmation's POST
    cancels. Works without JavaScript."""
    roles = roles_for(request.user)
    try:
        found = workflow_selectors.workflow_get(name=name, roles=roles, user=request.user)
    except NotFound as error:
        return _not_found(request, error)
    if not workflow_selectors.can_cancel(workflow=found, roles=roles, user=request.user):
        return _error(request, 403, "Not allowed",
                      "Only the submitter or an admin of the pool can cancel it.")
    if request.method == "GET":
        return render(request, "dashboard/workflow_cancel.html", {
            "workflow": found,
            "alive": found.status in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING),
            "gpus_held": queries.gpus_held(found)})
    try:
        lifecycle.workflow_cancel(workflow=found, by=request.user.get_username())
        messages.success(request, f"Workflow {name} canceled: its GPUs are released.")
    except OsmoError as error:
        messages.error(request, error.detail)
    return redirect("dashboard:workflow", name=name)


@login_required
@require_GET
def workflows(request):
    """Every workflow the caller can see, finished ones too: filters, search, pages."""
    form = forms.WorkflowFilterForm(request.GET or None)
    values = form.cleaned_data if form.is_valid() else {}
    rows = workflow_selectors.visible_workflows(roles=roles_for(request.user),
                                                user=request.user).order_by("-submitted_at",
                                                                            "-id")
    if values.get("status"):
        rows = rows.filter(status__in=values["status"])
    if values.get("pool"):
        # ids as values, so the (pool, status, submitted_at) index gives the page in order
        rows = rows.filter(pool_id__in=Pool.objects.filter(
            Q(name=values["pool"]) | Q(parent_id=values["pool"])).values("pk"))
    if values.get("user"):
        rows = rows.filter(user__username=values["user"])
    if values.get("q"):
        rows = rows.filter(name__icontains=values["q"])
    page = bounded_page(rows, values.get("page") or 1, WORKFLOWS_PER_PAGE)
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "dashboard/workflows.html", {
        "form": form, "page": page, "query": query.urlencode(),
        "statuses": WorkflowStatus.choices, "chosen": values.get("status") or []})


# --- admin forms -----------------------------------------------------------------------------

def _admin_parent(request, name: str):
    """(parent, None) for a pool admin, else (None, error response): 404 for a pool the user
    cannot see, 403 for one they may only use."""
    roles = roles_for(request.user)
    try:
        parent = pool_selectors.pool_get(name=name, roles=roles)
    except NotFound as error:
        return None, _not_found(request, error)
    if parent.is_subpool:
        return None, _error(request, 404, "Not found",
                            f"'{name}' is a subpool; subpools cannot have subpools.")
    if not roles.can_admin(parent.name):
        return None, _forbidden(request, parent.name)
    return parent, None


def _admin_subpool(request, name: str, subpool_name: str):
    parent, refused = _admin_parent(request, name)
    if refused:
        return None, refused
    try:
        return pool_selectors.subpool_get(parent=parent, subpool_name=subpool_name), None
    except NotFound as error:
        return None, _not_found(request, error)


def _posted(request):
    """The form data of a POST (even an empty one: a confirmation has no fields)."""
    return request.POST if request.method == "POST" else None


def _form_page(request, template: str, context: dict, status: int = 200):
    return render(request, template, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def subpool_create(request, name: str):
    parent, refused = _admin_parent(request, name)
    if refused:
        return refused
    form = forms.SubpoolCreateForm(_posted(request))
    if request.method == "POST" and form.is_valid():
        result = form.save(actor=request.user, parent=parent)
        if result is not None:
            subpool, created = result
            verb = "created" if created else "reactivated"
            messages.success(request, f"Subpool {subpool.name} {verb} with "
                                      f"{subpool.quota_gpus} GPUs.")
            return redirect(_pool_url(parent.name))
    status = form.status_code if request.method == "POST" else 200
    return _form_page(request, "dashboard/subpool_form.html",
                      {"form": form, "parent_name": parent.name, "title": "Create a subpool",
                       "action": reverse("dashboard:subpool-create", args=[parent.name]),
                       "submit_label": "Create subpool"}, status)


@login_required
@require_http_methods(["GET", "POST"])
def subpool_quota(request, name: str, subpool: str):
    target, refused = _admin_subpool(request, name, subpool)
    if refused:
        return refused
    form = forms.SubpoolQuotaForm(_posted(request),
                                  initial={"quota_gpus": target.quota_gpus})
    if request.method == "POST" and form.is_valid():
        if form.save(actor=request.user, subpool=target):
            messages.success(request, f"Subpool {target.name} now has "
                                      f"{form.cleaned_data['quota_gpus']} GPUs.")
            return redirect(_pool_url(target.parent_id))
    status = form.status_code if request.method == "POST" else 200
    return _form_page(request, "dashboard/subpool_form.html",
                      {"form": form, "parent_name": target.parent_id, "subpool": target,
                       "title": f"Change the quota of {target.name}",
                       "action": reverse("dashboard:subpool-quota", args=[name, subpool]),
                       "submit_label": "Change quota"}, status)


@login_required
@require_http_methods(["GET", "POST"])
def subpool_delete(request, name: str, subpool: str):
    target, refused = _admin_subpool(request, name, subpool)
    if refused:
        return refused
    form = forms.SubpoolDeleteForm(_posted(request))
    usage = pool_selectors.usage_by_pool([target.pk]).get(target.pk, quota.Usage())
    if request.method == "POST" and form.is_valid():
        deleted = form.save(actor=request.user, subpool=target)
        if deleted is not None:
            if deleted.subpool_state == SubpoolState.DELETING:
                messages.warning(request, f"Subpool {deleted.name} is DELETING: it takes no new "
                                          f"work and is archived once its running workflows "
                                          f"finish.")
            else:
                messages.success(request, f"Subpool {deleted.name} is {deleted.subpool_state}.")
            return redirect(_pool_url(target.parent_id))
    status = form.status_code if request.method == "POST" else 200
    return _form_page(request, "dashboard/subpool_delete.html",
                      {"form": form, "parent_name": target.parent_id, "subpool": target,
                       "usage": usage, "title": f"Delete {target.name}"}, status)


# --- the cluster -----------------------------------------------------------------------------

def _cluster_context(request) -> dict:
    """The cluster page's view model: the heat map and tables of the nodes the filters keep,
    the queues and pending gangs the caller may see, and the usage charts."""
    roles = roles_for(request.user)
    form = forms.ClusterFilterForm(request.GET or None)
    values = form.cleaned_data if form.is_valid() else {}
    chosen = ClusterFilter(zone=values.get("zone") or "", rack=values.get("rack") or "",
                           state=values.get("state") or "", node=values.get("node") or "",
                           backend=values.get("backend") or "")
    overview = queries.cluster_overview(roles=roles, user=request.user)
    hours = values.get("hours") or 6
    now = timezone.now()
    return {"overview": overview, "zones": filter_zones(overview.zones, chosen),
            "filter": chosen, "form": form, "show_tables": bool(values.get("tables")),
            "charts": queries.usage_history(roles=roles, since=now - timedelta(hours=hours),
                                            now=now),
            "hours": hours, "query": request.GET.urlencode()}


@login_required
@require_GET
def cluster(request):
    return render(request, "dashboard/cluster.html",
                  {**_cluster_context(request), "refresh_seconds": REFRESH_SECONDS})


@login_required
@require_GET
def cluster_fragment(request):
    return render(request, "dashboard/_cluster.html", _cluster_context(request))


# --- the backends ----------------------------------------------------------------------------

@login_required
@require_GET
def backends(request):
    return render(request, "dashboard/backends.html",
                  {"backends": queries.backends_overview(now=timezone.now())})
