"""Django settings, 12-factor.

With nothing set, the embedded default serves the demo: SQLite and the scheduling loop
in-process, no Redis needed. Production sets DATABASE_URL (PostgreSQL), REDIS_URL, SECRET_KEY and
ALLOWED_HOSTS (it refuses to start without the last two), and runs Celery workers and beat (see
docs/operations.md).
"""

from __future__ import annotations

import logging
import logging.config
import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from controlplane import structured_logs

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_number(name: str, default: str, kind: type[float] | type[int], least: float, above: bool) -> float | int:
    raw = os.environ.get(name, default)
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value != value or (value <= least if above else value < least):
        unit = "a whole number" if kind is int else "a number"
        bound = f"> {least:g}" if above else f">= {least:g}"
        # named here: Python's own "could not convert string to float: '20s'" names no variable
        raise ImproperlyConfigured(f"{name} must be {unit} {bound}, got {raw!r} (docs/operations.md lists "
                                   f"every setting with its default, {default}).")
    return value


def _env_float(name: str, default: str, *, least: float = 0.0, above: bool = True) -> float:
    """A positive number (seconds, days, ...) from the environment; refuses to start otherwise."""
    return float(_env_number(name, default, float, least, above))


def _env_int(name: str, default: str, *, least: int = 1) -> int:
    """A whole number >= ``least`` from the environment; refuses to start otherwise."""
    return int(_env_number(name, default, int, least, above=False))


def _env_rate(name: str, default: str) -> str:
    """A request rate as the API's throttle reads it (api/throttling.parse_rate): a whole number
    >= 1, `/`, and a period whose first letter is s, m, h or d. Refused at start otherwise: until
    5 Dec `abc` started fine and then every API request answered 500."""
    raw = os.environ.get(name, default)
    count, slash, period = raw.partition("/")
    if not (slash and count.strip().isdigit() and int(count) >= 1 and period.strip()[:1].lower() in set("smhd")):
        raise ImproperlyConfigured(f"{name} must be REQUESTS/PERIOD (a whole number >= 1, per s, m, h or d: "
                                   f"100000/hour, 50/minute), got {raw!r} (docs/operations.md lists every setting "
                                   f"with its default, {default}).")
    return raw


DEBUG = _env_bool("DEBUG", False)

#: The shortest bootstrap secret a deployment takes: it registers nodes, which are then handed
#: jobs (their commands and environments), from anywhere the agent endpoints answer.
MIN_BOOTSTRAP_SECRET = 24


def _bootstrap_secret() -> str:
    """QM_AGENT_BOOTSTRAP_TOKEN; a deployment refuses one short enough to guess (the demo and an
    unset one are left alone)."""
    secret = os.environ.get("QM_AGENT_BOOTSTRAP_TOKEN", "")
    if secret and len(secret) < MIN_BOOTSTRAP_SECRET and DEPLOYMENT:
        raise ImproperlyConfigured(
            f"QM_AGENT_BOOTSTRAP_TOKEN is {len(secret)} characters: a deployment's bootstrap secret needs at least "
            f"{MIN_BOOTSTRAP_SECRET}, since anyone who guesses it registers a node and is handed jobs. Make one with "
            f"`{_GENERATE_KEY}` (docs/operations.md, The node agent).")
    return secret
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]
# Behind TLS the session and CSRF cookies go over https only (QM_SECURE_COOKIES; unset: when
# every trusted origin is https), so no http:// request to the host carries a signed-in session.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _env_bool(
    "QM_SECURE_COOKIES", bool(CSRF_TRUSTED_ORIGINS) and all(o.startswith("https://") for o in CSRF_TRUSTED_ORIGINS)
)

INSTALLED_APPS = [
    # Before django.contrib.admin: its admin/base_site.html extends the admin's (templates are
    # found in the first app that has them). Before django.contrib.auth: its changepassword and
    # createsuperuser are ours, which record what they do in the audit trail
    # (controlplane/management/commands); a command's first app wins.
    "controlplane",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # after authentication: who reads decides how sentences name other teams' jobs
    "controlplane.services.job_mentions.JobMentionsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'quartermaster.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's in-process loop and web requests share the file; wait instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # IMMEDIATE transactions take the write lock up front, so a read-then-write transaction
    # waits for the lock instead of failing with "database is locked" when it upgrades.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")

# --- Secret key and host names ---------------------------------------------------------------
# A deployment (PostgreSQL or Redis configured, DEBUG off) must name its own SECRET_KEY and
# ALLOWED_HOSTS: it refuses to start without them rather than sign sessions with a key anyone
# can read here, or answer to any Host header. The embedded demo (SQLite, no Redis) needs no
# configuration: it signs with a key generated at start, and says so in its log.
DEPLOYMENT = not DEBUG and (DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3" or bool(REDIS_URL))
_GENERATE_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
# The key this repository once shipped as the demo's fallback: published, so never a secret.
_PUBLISHED_DEMO_KEY = "quartermaster-insecure-demo-key-set-SECRET_KEY-in-production"
_STARTUP_WARNINGS: list[str] = []
SECRET_KEY = os.environ.get("SECRET_KEY", "").strip()
if DEPLOYMENT and not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. This process runs as a deployment (DATABASE_URL is PostgreSQL or "
        "REDIS_URL is set, and DEBUG is off), and without its own key it would sign sessions with one "
        "anyone can know, so an admin's session could be forged. Set SECRET_KEY to a long random "
        "string, the same for every process (web, workers, beat, migrate), e.g. the output of "
        f"`{_GENERATE_KEY}`, and keep it secret (docs/operations.md, Starting it)."
    )
if DEPLOYMENT and SECRET_KEY == _PUBLISHED_DEMO_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is the demo's key published in this repository, so anyone could forge a session. "
        f"Generate one of your own, e.g. with `{_GENERATE_KEY}` (docs/operations.md, Starting it)."
    )
if not SECRET_KEY:
    SECRET_KEY = secrets.token_urlsafe(50)
    _STARTUP_WARNINGS.append(
        "SECRET_KEY is not set: the embedded demo signs sessions with a key generated at start, so a "
        "restart signs everyone out. Fine for the demo; anything else sets SECRET_KEY "
        "(docs/operations.md, Starting it)."
    )
_hosts = os.environ.get("ALLOWED_HOSTS", "").strip()
if DEPLOYMENT and not _hosts:
    raise ImproperlyConfigured(
        "ALLOWED_HOSTS is not set. A deployment names the host names its web answers to, "
        "comma-separated: the public name clients use (e.g. qm.example.org) and any internal one the "
        "agents or a load balancer's health check use (e.g. web,localhost). `*` accepts any Host "
        "header, only behind a proxy that checks it (docs/operations.md, Starting it)."
    )
ALLOWED_HOSTS = [h.strip() for h in (_hosts or "*").split(",") if h.strip()]

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
# Django's own permissions (a staff user's groups), then a fleet admin's by role: a membership
# with role admin holds the fleet's permissions in the admin UI, read from the memberships at
# each request (controlplane/services/access.py, FleetAdminPermissions; docs/operations.md).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "controlplane.services.access.FleetAdminPermissions",
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# The admin's dates as the pages and qm say them ("2026-12-05 19:35:00 UTC").
FORMAT_MODULE_PATH = ["controlplane.formats"]
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("QM_STATIC_ROOT", BASE_DIR / "var" / "static"))
# WhiteNoise serves from finders in the demo and from STATIC_ROOT after collectstatic; it
# expects the directory to exist either way.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Celery / Redis -------------------------------------------------------------------------
# Without Redis the demo runs the loop in-process; tasks then execute eagerly.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that cannot reach Redis keeps trying, however long (every QM_BROKER_RETRY_S):
# Celery's default gives up after 100 attempts (~47 min) and the worker exits with status 0,
# leaving no loop, no reconcile and nothing to restart it (docs/operations.md, Redis goes away).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Every worker's consumer gives up the scheduler's lead when it loses the broker, and tries to
# reconnect every QM_BROKER_RETRY_S rather than after growing waits (controlplane/broker_consumer.py).
CELERY_WORKER_CONSUMER = "controlplane.broker_consumer:Consumer"
# A broker that stops answering without closing the connection (a partition that drops
# packets, a dead host behind NAT) must hang no process: a blocking Redis command gives up after
# 3 s (beat then runs the loop itself), a new connection after 2 s, and a worker whose BRPOP
# reply is overdue drops the connection after about 6-11 s (kombu's default check: 26-51 s).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_timeout": 3.0,
    "socket_connect_timeout": 2.0,
    "socket_keepalive": True,
    "health_check_interval": 5,
}

# --- Scheduling loop -----------------------------------------------------------------------
QM = {
    # How often beat ticks a cycle, and how long a submit waits before triggering one.
    "CYCLE_INTERVAL_S": _env_float("QM_CYCLE_INTERVAL_S", "2"),
    "CYCLE_DEBOUNCE_S": _env_float("QM_CYCLE_DEBOUNCE_S", "0.5", above=False),
    # The leader lease: a cycle commits only while its epoch is the current one.
    "LEADER_LEASE_S": _env_float("QM_LEADER_LEASE_S", "15"),
    # How often a worker that lost the broker tries to reconnect (controlplane/broker_consumer.py).
    "BROKER_RETRY_S": _env_float("QM_BROKER_RETRY_S", "1"),
    # A node that misses heartbeats for SUSPECT_AFTER_S is suspect; after its agent lease
    # (AGENT_LEASE_S) expires, its allocations are fenced.
    "AGENT_LEASE_S": _env_float("QM_AGENT_LEASE_S", "20"),
    "SUSPECT_AFTER_S": _env_float("QM_SUSPECT_AFTER_S", "8"),
    "FAIR_SHARE_HALF_LIFE_S": _env_float("QM_FAIR_SHARE_HALF_LIFE_S", str(7 * 86400)),
    "PLACEMENT_POLICY": os.environ.get("QM_PLACEMENT_POLICY", "pack"),
    # Full placement searches per cycle (every waiting job is still explained). A burst of
    # thousands of small jobs is admitted in one cycle; the commit binds them in bulk.
    "MAX_PLACEMENTS_PER_CYCLE": _env_int("QM_MAX_PLACEMENTS_PER_CYCLE", "4096"),
    "IN_PROCESS_LOOP": _env_bool("QM_IN_PROCESS_LOOP", not REDIS_URL),
    # Lets a node agent register its node the first time (it then gets its own node token).
    # Empty: agents can only re-register with a node token they already hold.
    "AGENT_BOOTSTRAP_TOKEN": _bootstrap_secret(),
    # Wake-up long polls (POST /api/v1/agent/nodes/wait) one web process holds at once; each
    # holds a thread, so keep it below the process's threads (docs/operations.md, Wake-ups).
    "AGENT_MAX_WAITS": _env_int("QM_AGENT_MAX_WAITS", "2", least=0),
    # A retired node's agent is told (Retry-After) to wait as long as the node has been retired,
    # within these bounds (an agent keeps what it is told within 30 s..1 h).
    "RETIRED_RETRY_AFTER_MIN_S": _env_float("QM_RETIRED_RETRY_AFTER_MIN_S", "60"),
    "RETIRED_RETRY_AFTER_MAX_S": _env_float("QM_RETIRED_RETRY_AFTER_MAX_S", "900"),
    # Accounting (docs/accounting.md): how often raw samples are rolled up, how long raw samples
    # and minute rollups are kept (dropped only once their hour rollups exist), how long hour
    # rollups are kept (day rollups are kept forever), and the bearer token Prometheus scrapes
    # /metrics with (empty: signed-in admins only).
    "ACCOUNTING_ROLLUP_S": _env_float("QM_ACCOUNTING_ROLLUP_S", "15"),
    "RAW_SAMPLE_RETENTION_DAYS": _env_float("QM_RAW_SAMPLE_RETENTION_DAYS", "7"),
    "HOUR_ROLLUP_RETENTION_DAYS": _env_float("QM_HOUR_ROLLUP_RETENTION_DAYS", "400"),
    "METRICS_TOKEN": os.environ.get("QM_METRICS_TOKEN", ""),
    # Jobs' output kept per rank of each run (services/job_logs.py); older bytes are pruned.
    "JOB_LOG_KEEP_BYTES_PER_RANK": _env_int("QM_JOB_LOG_KEEP_BYTES_PER_RANK", str(8 * 1024 * 1024)),
    # Job notifications by webhook (docs/operations.md, Notifications): the web UI's address for
    # the job links, how often the sender runs, each POST's connect and read timeouts, attempts
    # before a delivery is given up, failed attempts in a row before a hook reads as failing,
    # how long sent rows are kept, and the hosts hooks may POST to (comma-separated names or
    # .domain suffixes; empty: any host, private addresses included).
    "PUBLIC_URL": os.environ.get("QM_PUBLIC_URL", ""),
    "NOTIFY_INTERVAL_S": _env_float("QM_NOTIFY_INTERVAL_S", "10"),
    "WEBHOOK_TIMEOUT_S": _env_float("QM_WEBHOOK_TIMEOUT_S", "5"),
    "WEBHOOK_MAX_ATTEMPTS": _env_int("QM_WEBHOOK_MAX_ATTEMPTS", "10"),
    "WEBHOOK_FAILING_AFTER": _env_int("QM_WEBHOOK_FAILING_AFTER", "5"),
    "NOTIFICATION_KEEP_DAYS": _env_float("QM_NOTIFICATION_KEEP_DAYS", "30"),
    "WEBHOOK_ALLOWED_HOSTS": [h.strip() for h in os.environ.get("QM_WEBHOOK_ALLOWED_HOSTS", "").split(",") if h.strip()],
    # Private, loopback, link-local (cloud metadata) addresses a hook may reach anyway, in CIDR.
    "WEBHOOK_ALLOWED_NETWORKS": [
        n.strip() for n in os.environ.get("QM_WEBHOOK_ALLOWED_NETWORKS", "").split(",") if n.strip()],
    # Plain http hooks: only to a host inside WEBHOOK_ALLOWED_NETWORKS (an internal relay), unless
    # this is set (a closed network): the payload would travel in clear.
    "WEBHOOK_ALLOW_HTTP": os.environ.get("QM_WEBHOOK_ALLOW_HTTP", "").strip().lower() in ("1", "true", "yes", "on"),
    # The longest a maintenance window may last (services/maintenance.py), in seconds: 14 days.
    "MAINTENANCE_MAX_S": _env_int("QM_MAINTENANCE_MAX_S", str(14 * 86400)),
}
# The scheduling loop has a queue of its own, so a long accounting rollup never delays a cycle:
# run dedicated loop workers with `-Q qm.loop` and the rest with `-Q celery`; a worker started
# without -Q consumes both (one worker is enough for a small fleet).
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = (Queue("celery"), Queue("qm.loop"))
CELERY_TASK_ROUTES = {name: {"queue": "qm.loop"} for name in ("qm.tick", "qm.cycle", "qm.reconcile")}
# Beat sends the loop's ticks, and runs them itself while it cannot reach the broker, under the
# leader lease as a worker would (controlplane/beat.py; docs/operations.md, Redis goes away).
CELERY_BEAT_SCHEDULER = "controlplane.beat:LoopScheduler"
# Beat only ticks; tasks decide whether there is work (controlplane/tasks.py). A tick that
# arrives later than one interval is dropped (expires), so a backlog never replays.
CELERY_BEAT_SCHEDULE = {
    # Accounting: raw samples → rollups; then what is past retention is dropped (docs/accounting.md).
    "accounting-rollup": {
        "task": "qm.accounting.roll_up",
        "schedule": QM["ACCOUNTING_ROLLUP_S"],
        "options": {"expires": QM["ACCOUNTING_ROLLUP_S"]},
    },
    "accounting-retention": {"task": "qm.accounting.retention", "schedule": 3600.0, "options": {"expires": 3600.0}},
    # Ended jobs' costs, remembered for the history's total (services/job_costs.py).
    "accounting-job-costs": {"task": "qm.accounting.remember_job_costs", "schedule": 60.0, "options": {"expires": 60.0}},
    # Within the hour yesterday's teams-page bins are kept, so no month view groups a day itself.
    "keep-team-days": {"task": "qm.frontend.keep_team_days", "schedule": 1800.0, "options": {"expires": 1800.0}},
    "scheduling-cycle": {
        "task": "qm.tick",
        "schedule": QM["CYCLE_INTERVAL_S"],
        "options": {"expires": QM["CYCLE_INTERVAL_S"]},
    },
    "reconcile-nodes": {
        "task": "qm.reconcile",
        "schedule": QM["CYCLE_INTERVAL_S"],
        "options": {"expires": QM["CYCLE_INTERVAL_S"]},
    },
    # Webhook deliveries due (retries included); new ones are also sent on commit.
    "notification-delivery": {
        "task": "qm.notify",
        "schedule": QM["NOTIFY_INTERVAL_S"],
        "options": {"expires": QM["NOTIFY_INTERVAL_S"]},
    },
}

# --- REST framework ------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["controlplane.api.filter_backends.StrictFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": _env_rate("QM_USER_THROTTLE", "100000/hour"),
                               # failed sign-ins per username from any address, a sliding window
                               "login_user": _env_rate("QM_SIGN_IN_FAILURES_PER_USERNAME", "20/hour"),
                               # node agents' failed authentications per client address, a sliding window
                               "agent_auth": _env_rate("QM_AGENT_AUTH_FAILURES", "60/minute")},
    # Whose address a sign-in counts against (api/throttling.py): with no proxy in front, the
    # connection's; behind N proxies that each append to X-Forwarded-For, the one the Nth from
    # the right recorded. Left unset DRF took the whole header as the address, so a guesser
    # sending a new X-Forwarded-For with every password was never throttled.
    "NUM_PROXIES": _env_int("QM_TRUSTED_PROXIES", "0", least=0),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Quartermaster API",
    "DESCRIPTION": "Submit and watch GPU jobs, tune quotas, read showback.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Job and node both have a `state`; name their enums so the schema has no collision.
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "controlplane.choices.JobState",
        "NodeStateEnum": "controlplane.choices.NodeState",
    },
}
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# --- Logging: structured, one JSON object per line in production ---------------------------
try:
    LOG_FORMAT, _LOG_LEVEL = structured_logs.log_settings(os.environ, "console" if DEBUG else "json")
except structured_logs.LogSettingRefused as refused:
    raise ImproperlyConfigured(f"{refused} (docs/operations.md, Starting it).") from None
LOGGING = structured_logs.logging_config(LOG_FORMAT, _LOG_LEVEL, loggers={"django.server": {"level": "WARNING"}})


def configure_logging(config: dict[str, Any]) -> None:
    """Django's dictConfig, then what the settings had to say before logging was set up (the
    demo's generated key), so it reaches the process's log in its format."""
    logging.config.dictConfig(config)
    for message in _STARTUP_WARNINGS:
        logging.getLogger("controlplane.settings").warning(message)


LOGGING_CONFIG = "controlplane.settings.configure_logging"
