"""Django settings for ctxweb, read from the environment.

Environment variables: CTXWEB_DATA_DIR, DATABASE_URL, DJANGO_DEBUG, DJANGO_SECRET_KEY,
DJANGO_ALLOWED_HOSTS, CTXWEB_MAX_BODY_BYTES, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
CTXWEB_SUMMARY_MODEL, CTXWEB_TOKEN_ENCODING, CTXWEB_STORAGE_BACKEND, CTXWEB_STORAGE_OPTIONS,
CTXWEB_REDIS_URL, CTXWEB_THROTTLE_COMPACT, CTXWEB_THROTTLE_PREPARE, CTXWEB_CONN_MAX_AGE,
CTXWEB_DB_POOL_SIZE, CTXWEB_DB_POOL_TIMEOUT (docs/deployment.md lists them all).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dj_database_url


def env_bool(name: str, default: bool) -> bool:
    """A boolean environment variable: 1/true/yes/on are true."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated environment variable as a list of non-empty items."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_rate(name: str, default: str) -> str:
    """A rate limit such as `30/min` (or `off`); anything else is a startup error."""
    value = os.environ.get(name, default).strip()
    if value.lower() in {"", "0", "off", "none"}:
        return "off"
    if not re.fullmatch(r"\d+\s*/\s*\d*\s*(s|sec|m|min|h|hour|d|day)", value.lower()):
        raise RuntimeError(f"{name} must look like 30/min (or be off), not {value!r}")
    return value


def env_json(name: str) -> dict[str, Any]:
    """A JSON-object environment variable ({} when unset); anything else is a startup error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise RuntimeError(f"{name} is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise RuntimeError(f"{name} must be a JSON object")
    return value


BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("CTXWEB_DATA_DIR", BASE_DIR / "var")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DJANGO_DEBUG", True)
# Django's technical 404/500 pages with DEBUG on (`make dev`); otherwise the app's own pages.
CTXWEB_DEBUG_PAGES = env_bool("CTXWEB_DEBUG_PAGES", False)
_DEV_SECRET = "django-insecure-ctxweb-local-development-key-change-me-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", _DEV_SECRET if DEBUG else "")
if not SECRET_KEY:
    raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "ninja",
    "django_htmx",
    "template_partials",
    # sessions_app before django_tasks_db: its db_worker command (with the job reaper) wins.
    "sessions_app",
    "django_tasks",
    "django_tasks_db",
]

MIDDLEWARE = [
    # Outermost: every error under /api/ leaves as JSON, whatever answered it.
    "sessions_app.middleware.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "sessions_app.middleware.BodySizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Innermost: the app's own 404/500 pages with DEBUG on too (sessions_app/views/error_pages.py).
    "sessions_app.views.error_pages.AppErrorPagesMiddleware",
]

ROOT_URLCONF = "ctxweb.urls"
WSGI_APPLICATION = "ctxweb.wsgi.application"

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
                "csp.context_processors.nonce",
            ],
        },
    },
]


def database_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `default` database from DATABASE_URL, CTXWEB_CONN_MAX_AGE and CTXWEB_DB_POOL_SIZE.

    A process serving ASGI (ctxweb/asgi.py sets CTXWEB_ASGI_PROCESS) keeps no connection
    open after a request: Django runs each request's synchronous code in a thread of its own
    (asgiref's ThreadSensitiveContext), and a connection is per thread, so a connection kept
    for reuse would belong to a finished thread, never be reused, and close only when the
    garbage collector gets to it: under load the server runs out of connections
    (docs/deployment.md). On PostgreSQL such a process takes its connections from a pool
    (psycopg_pool) of at most CTXWEB_DB_POOL_SIZE (default 10, 0: none) instead, reused by
    every request thread. Elsewhere the pool is used only when CTXWEB_DB_POOL_SIZE is set.
    A request waits at most CTXWEB_DB_POOL_TIMEOUT seconds (10) for a pooled connection.
    """
    asgi = environ.get("CTXWEB_ASGI_PROCESS", "") == "1"
    database: dict[str, Any] = dict(
        dj_database_url.parse(
            environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'ctxweb.sqlite3'}",
            conn_max_age=0 if asgi else int(environ.get("CTXWEB_CONN_MAX_AGE", "0")),
        )
    )
    options = database.setdefault("OPTIONS", {})
    if database["ENGINE"] == "django.db.backends.sqlite3":
        # WAL and a busy timeout let the web server and the task worker share one SQLite file;
        # IMMEDIATE transactions take the write lock when they begin, and ctxweb/sqlite/base.py
        # has the writers of all processes take turns (docs/deployment.md, "SQLite").
        database["ENGINE"] = "ctxweb.sqlite"
        # The test database stays in memory, as with Django's own engine: pytest-django
        # recognises that one by its ENGINE name, any other by this name.
        database["TEST"] = {"NAME": ":memory:"}
        options.update(
            {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
    pool = int(environ.get("CTXWEB_DB_POOL_SIZE", "10" if asgi else "0"))
    if pool > 0 and database["ENGINE"] == "django.db.backends.postgresql":
        database["CONN_MAX_AGE"] = 0  # a pooled connection goes back to the pool instead
        # A request waits up to `timeout` seconds for a free connection (or, with the
        # database down, for one to open), then fails: 503 under /api/.
        timeout = float(environ.get("CTXWEB_DB_POOL_TIMEOUT", "10"))
        options["pool"] = {"min_size": 1, "max_size": pool, "timeout": timeout}
    return database


DATABASES = {"default": database_settings(os.environ)}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The cache holds the failed-authentication counts and the rate limits of the summarizing
# endpoints (sessions_app/auth.py, sessions_app/api/throttling.py), so in production it must be
# shared by every web process: the database cache (its table `ctxweb_cache` is made by
# `migrate`) unless CTXWEB_REDIS_URL names a Redis server (needs the `redis` extra) or
# CTXWEB_CACHE_BACKEND (+ CTXWEB_CACHE_LOCATION) names another Django cache class. With DEBUG
# on (development, one process) the default is per-process memory.
CTXWEB_CACHE_TABLE = "ctxweb_cache"
if os.environ.get("CTXWEB_CACHE_BACKEND"):
    _CACHE = {
        "BACKEND": os.environ["CTXWEB_CACHE_BACKEND"],
        "LOCATION": os.environ.get("CTXWEB_CACHE_LOCATION", CTXWEB_CACHE_TABLE),
    }
elif os.environ.get("CTXWEB_REDIS_URL"):
    _CACHE = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ["CTXWEB_REDIS_URL"],
    }
elif DEBUG:
    _CACHE = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ctxweb"}
else:
    _CACHE = {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": CTXWEB_CACHE_TABLE,
    }
CACHES = {"default": _CACHE}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns about a missing one before collectstatic

# Archives, offloaded tool results and uploaded sources go through the default storage:
# a folder of CTXWEB_DATA_DIR unless CTXWEB_STORAGE_BACKEND names another Django storage
# class, configured by the JSON object CTXWEB_STORAGE_OPTIONS (docs/deployment.md has an S3
# example: django-storages' S3Storage; boto3 reads AWS_* credentials from the environment).
STORAGES = {
    "default": {
        "BACKEND": os.environ.get(
            "CTXWEB_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage"
        ),
        "OPTIONS": env_json("CTXWEB_STORAGE_OPTIONS")
        if "CTXWEB_STORAGE_BACKEND" in os.environ
        else {"location": str(DATA_DIR / "blobs")},
    },
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}
# Until `collectstatic` has filled STATIC_ROOT, serve straight from the source folders, so the
# pages work with DEBUG off out of the box; after it, serve the collected, compressed files.
WHITENOISE_USE_FINDERS = env_bool("CTXWEB_STATIC_FINDERS", not any(STATIC_ROOT.iterdir()))

TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
    }
}

# Security headers. A strict policy: scripts only from this origin, no inline script.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# ctxweb's own settings.
CTXWEB_MAX_BODY_BYTES = int(os.environ.get("CTXWEB_MAX_BODY_BYTES", str(20 * 1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = CTXWEB_MAX_BODY_BYTES + 1024 * 1024
CTXWEB_TOKEN_ENCODING = os.environ.get("CTXWEB_TOKEN_ENCODING", "o200k_base")
# Under ASGI, how many of Django's requests a process runs at once (0: no limit), and the
# seconds after which a slow one stops counting (ctxweb/admission.py; docs/deployment.md).
CTXWEB_WEB_REQUESTS_AT_ONCE = int(os.environ.get("CTXWEB_WEB_REQUESTS_AT_ONCE", "2"))
CTXWEB_WEB_REQUEST_SLOT_SECONDS = float(os.environ.get("CTXWEB_WEB_REQUEST_SLOT_SECONDS", "0.1"))
# Where the tiktoken vocabularies are unpacked ("": the system temp dir's ctxweb-tiktoken).
CTXWEB_TIKTOKEN_DIR = os.environ.get("CTXWEB_TIKTOKEN_DIR", "")
# Counts from bpe-openai's faster counter (same figures; its tables cost memory per process).
CTXWEB_FAST_TOKEN_COUNTING = env_bool("CTXWEB_FAST_TOKEN_COUNTING", True)
CTXWEB_SUMMARY_MODEL = os.environ.get("CTXWEB_SUMMARY_MODEL", "")
# The MCP server at /mcp (sessions_app/mcp/) and the recall line of summaries (README, "Let
# the agent look back"); off: /mcp answers 404 and summaries carry no recall line.
CTXWEB_MCP_ENABLED = env_bool("CTXWEB_MCP_ENABLED", True)
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "")
# Variables a summarizer configuration may name for its key besides CTXWEB_SUMMARY_KEY_*
# (docs/deployment.md, "Secrets"); never the app's own (DJANGO_*, CTXWEB_*, DATABASE_URL).
CTXWEB_SUMMARY_KEY_ENVS = env_list("CTXWEB_SUMMARY_KEY_ENVS", "ANTHROPIC_API_KEY,OPENAI_API_KEY")

# The transparent proxy (sessions_app/proxy/, README "Point an agent at the proxy"): where it
# forwards, and the server's provider keys used when a caller presents a ctxweb key instead.
CTXWEB_UPSTREAM_ANTHROPIC_URL = os.environ.get(
    "CTXWEB_UPSTREAM_ANTHROPIC_URL", "https://api.anthropic.com"
)
CTXWEB_UPSTREAM_OPENAI_URL = os.environ.get("CTXWEB_UPSTREAM_OPENAI_URL", "https://api.openai.com")
CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = os.environ.get("CTXWEB_UPSTREAM_ANTHROPIC_API_KEY", "")
CTXWEB_UPSTREAM_OPENAI_API_KEY = os.environ.get("CTXWEB_UPSTREAM_OPENAI_API_KEY", "")
CTXWEB_UPSTREAM_TIMEOUT_SECONDS = float(os.environ.get("CTXWEB_UPSTREAM_TIMEOUT_SECONDS", "600"))
# Background jobs (docs/deployment.md): heartbeat of a running job, when a silent one counts
# as lost, and how often each `manage.py db_worker` looks for lost jobs.
CTXWEB_JOB_HEARTBEAT_SECONDS = float(os.environ.get("CTXWEB_JOB_HEARTBEAT_SECONDS", "5"))
CTXWEB_JOB_STALE_SECONDS = float(os.environ.get("CTXWEB_JOB_STALE_SECONDS", "60"))
CTXWEB_REAPER_INTERVAL_SECONDS = float(os.environ.get("CTXWEB_REAPER_INTERVAL_SECONDS", "30"))
CTXWEB_JOB_RETRY_SECONDS = float(os.environ.get("CTXWEB_JOB_RETRY_SECONDS", "5"))
# Per-process cache of assembled runtime contexts (bytes); 0 turns it off.
CTXWEB_CONTEXT_CACHE_BYTES = int(
    os.environ.get("CTXWEB_CONTEXT_CACHE_BYTES", str(64 * 1024 * 1024))
)
# Reverse proxies in front of the web processes (nginx: 1). Failed authentications are
# then charged to the client address the outermost proxy saw (X-Forwarded-For, counted
# from the right), not to the proxy's own address.
CTXWEB_TRUSTED_PROXIES = int(os.environ.get("CTXWEB_TRUSTED_PROXIES", "0"))
# Failed API authentications allowed per client address (and per presented key) and window
# before 429 (sessions_app.auth); a valid key is never refused for them.
CTXWEB_AUTH_FAILURE_LIMIT = int(os.environ.get("CTXWEB_AUTH_FAILURE_LIMIT", "20"))
CTXWEB_AUTH_FAILURE_WINDOW_SECONDS = int(
    os.environ.get("CTXWEB_AUTH_FAILURE_WINDOW_SECONDS", "300")
)
# Failed logins (/accounts/login/, /admin/login/) allowed per client address and per user
# name in the same window before 429 (sessions_app/views/login.py).
CTXWEB_LOGIN_FAILURE_LIMIT = int(os.environ.get("CTXWEB_LOGIN_FAILURE_LIMIT", "10"))
# Requests per API key (or browser user) to the endpoints that can call the summary model:
# `N/unit` (unit s, min, hour, day; `100/5min` works too) or `off`. COMPACT: POST /api/compact
# and POST /api/sessions/{id}/compactions; PREPARE: POST /api/sessions/{id}/context/prepare,
# called before every model call, so it gets more room.
CTXWEB_THROTTLE_COMPACT = env_rate("CTXWEB_THROTTLE_COMPACT", "30/min")
CTXWEB_THROTTLE_PREPARE = env_rate("CTXWEB_THROTTLE_PREPARE", "120/min")
CTXWEB_SAMPLES_DIR = Path(
    os.environ.get("CTXWEB_SAMPLES_DIR", BASE_DIR.parent / "shared" / "samples")
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {"()": "ctxweb.logging.KeyValueFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "structured"},
    },
    "loggers": {
        "compaction": {
            "handlers": ["console"],
            "level": os.environ.get("CTXWEB_LOG_LEVEL", "INFO"),
        },
        "sessions_app": {
            "handlers": ["console"],
            "level": os.environ.get("CTXWEB_LOG_LEVEL", "INFO"),
        },
        # Tracebacks of any 500 Django answers itself (Django logs them only with DEBUG on).
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}
