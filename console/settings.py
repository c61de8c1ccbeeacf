"""Django settings for the Quill console, read from QUILL_* environment variables.

Every variable has a default that works for `make run` on one machine; README.md
("Configuration") lists them. docker-compose.yml sets the same names.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

from broker.zk.security import credentials_from_env
from cluster_client.client_security import librdkafka_config
from cluster_client.clusters import clusters_from_env
from console.channel_layer import channel_layers
from console.env import env, env_bool, env_list, env_seconds
from quill_stack.redis_auth import redis_url_from_env
from quill_stack.state import create_private_once, private_dir, private_file

BASE_DIR = Path(__file__).resolve().parent.parent


def persistent_secret_key(path: Path) -> str:
    """A random key made on first use and kept in the state dir (mode 600); the
    console and its monitor may start together, and both get the same key."""
    return create_private_once(path, secrets.token_urlsafe(50).encode()).decode().strip()


# Where the console keeps its SQLite database and secret key (the supervisor's state dir):
# mode 0700, the database 0600 (it holds sessions and API token hashes).
STATE_DIR = private_dir(Path(env("QUILL_STATE_DIR", str(BASE_DIR / ".state"))).absolute())

SECRET_KEY = os.environ.get("QUILL_SECRET_KEY") or persistent_secret_key(STATE_DIR / "secret_key")
DEBUG = env_bool("QUILL_DEBUG", False)
ALLOWED_HOSTS = env_list("QUILL_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("QUILL_CSRF_TRUSTED_ORIGINS", "")

# The cluster the console operates, and the Redis that carries channels and Celery.
QUILL_BOOTSTRAP_SERVERS = env("QUILL_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
# Its credentials: QUILL_CLIENT_CONFIG / QUILL_SECURITY_PROTOCOL, QUILL_SASL_* ... as
# client properties ({} for plaintext); every Kafka client of the console merges them.
QUILL_CLIENT_SECURITY = librdkafka_config()
QUILL_ZOOKEEPER_CONNECT = env("QUILL_ZOOKEEPER_CONNECT", "127.0.0.1:2181")
# Its SASL login to ZooKeeper: the Client section of the JAAS file named by
# QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG (None: anonymous). With a login, znodes the
# console, monitor and workers create get Kafka's secure ACLs (broker.zk.security).
QUILL_ZOOKEEPER_CREDENTIALS = credentials_from_env()
# QUILL_REDIS_URL, with the password of QUILL_REDIS_PASSWORD_FILE (a 0600 file) or
# QUILL_REDIS_PASSWORD put in (quill_stack/redis_auth.py); Celery prints it masked.
QUILL_REDIS_URL = redis_url_from_env()
# Alert webhooks go to public addresses only; these networks (CIDRs, e.g.
# "10.0.0.0/8,127.0.0.1/32") are allowed too: an admin's choice (alerts.webhook).
QUILL_WEBHOOK_ALLOWED_NETWORKS = env_list("QUILL_WEBHOOK_ALLOWED_NETWORKS", "")
# The most partitions a topic may get from the console or its API (create or grow).
QUILL_MAX_PARTITIONS = int(env("QUILL_MAX_PARTITIONS", "10000"))
# From this many partitions the console's pages read leaders and ISRs from ZooKeeper
# watches it keeps (cluster_client/picture.py) instead of reading every partition's
# state znode per page load (10,000 reads: seconds). Smaller clusters read afresh.
QUILL_WATCH_FROM_PARTITIONS = int(env("QUILL_WATCH_FROM_PARTITIONS", "500"))
# Avro / Protobuf display (issue 29): a Confluent-compatible schema registry for records
# in the wire format (magic 0, schema id); optional basic auth; read by
# console.schemas.registry.registry_settings() (empty URL: no registry).
QUILL_SCHEMA_REGISTRY_URL = env("QUILL_SCHEMA_REGISTRY_URL", "")
QUILL_SCHEMA_REGISTRY_USER = env("QUILL_SCHEMA_REGISTRY_USER", "")
QUILL_SCHEMA_REGISTRY_PASSWORD = env("QUILL_SCHEMA_REGISTRY_PASSWORD", "")
QUILL_SCHEMA_REGISTRY_TIMEOUT_S = float(env("QUILL_SCHEMA_REGISTRY_TIMEOUT_S", "3"))
# Lag alerts and ops jobs (README "Alert and job timings"): Celery beat evaluates the lag
# alert rules every QUILL_ALERT_EVALUATE_S and scans for orphaned operations every
# QUILL_ORPHAN_SCAN_S; the monitor calls a lagging partition with no new commit STOP
# (or STALL) only after QUILL_LAG_MIN_SPAN_S at least (console.monitor.burrow).
QUILL_ALERT_EVALUATE_S = env_seconds("QUILL_ALERT_EVALUATE_S", 10.0)
QUILL_ORPHAN_SCAN_S = env_seconds("QUILL_ORPHAN_SCAN_S", 15.0)
QUILL_LAG_MIN_SPAN_S = env_seconds("QUILL_LAG_MIN_SPAN_S", 30.0)

# Broker N serves Prometheus metrics on this port + N - 1 (quill-stack's rule; 0: none);
# QUILL_METRICS_PORTS ({broker id: port}) overrides it per broker.
QUILL_METRICS_BASE_PORT = int(env("QUILL_METRICS_BASE_PORT", "9404"))
QUILL_METRICS_PORTS: dict[int, int] = {
    int(b): int(p)
    for b, _, p in (item.partition("=") for item in env_list("QUILL_METRICS_PORTS", ""))
}  # "1=9404,2=9405"

# ---- Several clusters (cluster_client/clusters.py) ----
# QUILL_CLUSTERS: JSON text or a JSON file's path listing the clusters one console
# manages (name, bootstrap.servers, zookeeper.connect, client.config,
# zookeeper.jaas.config, metrics.*). Absent: the settings above are the cluster
# "default". Bad config refuses to start, saying why.
QUILL_CLUSTERS = clusters_from_env()
# ---- end of several clusters ----

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",
    "axes",
    "csp",
    "console",
    "operations",  # long cluster jobs: records, job kinds, Celery tasks
    "alerts",  # lag alert rules and events, their Celery beat task
]

MIDDLEWARE = [
    "console.clusters.ClusterFromPath",  # /c/<name>/...: the cluster of the request
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "console.middleware.AuditDenied",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "console.middleware.ConsoleLoginRequired",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
]

# ---------------------------------------------------------------- web security
# Login rate limiting (django-axes): after QUILL_LOGIN_FAILURE_LIMIT wrong passwords for
# one user name from one address, that pair is refused (429) for QUILL_LOGIN_COOLOFF_S.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(env("QUILL_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(seconds=int(env("QUILL_LOGIN_COOLOFF_S", "900")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# Content-Security-Policy (django-csp): scripts and styles from /static/ only, no inline
# script and no eval; style attributes stay (the templates' layout tweaks), websockets
# to this host ('self'), no framing, forms post here only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

# Served over TLS (quill-stack SECURE=1 sets QUILL_CONSOLE_TLS): cookies only over
# HTTPS and HSTS. Over plain HTTP (make run on one machine) browsers would drop Secure
# cookies, so these follow the listener.
QUILL_CONSOLE_TLS = env_bool("QUILL_CONSOLE_TLS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = QUILL_CONSOLE_TLS
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = int(env("QUILL_HSTS_SECONDS", "31536000")) if QUILL_CONSOLE_TLS else 0
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

ROOT_URLCONF = "console.urls"
ASGI_APPLICATION = "console.asgi.application"
WSGI_APPLICATION = "console.wsgi.application"

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
                "console.clusters.switcher",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": private_file(Path(env("QUILL_DB_PATH", str(STATE_DIR / "console.sqlite3")))),
        "OPTIONS": {"timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CHANNEL_LAYERS = channel_layers(QUILL_REDIS_URL)

CELERY_BROKER_URL = QUILL_REDIS_URL
CELERY_RESULT_BACKEND = QUILL_REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Absolute: signing in belongs to no cluster (a relative name would be reversed under
# /c/<name>/, and the OIDC callback with it, which the provider does not know).
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = STATE_DIR / "static"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["stderr"], "level": env("QUILL_LOG_LEVEL", "INFO")},
}

# ---------------------------------------------------------------- single sign-on
# LDAP (QUILL_LDAP_*) and OpenID Connect (QUILL_OIDC_*) logins beside the local ones,
# roles from group membership at each login (console/sso, README "Single sign-on").
# Neither set: local logins only, the login page unchanged.
from console.sso import config as _sso  # noqa: E402 - this block stays apart for merges

_SSO_LDAP, _SSO_OIDC = _sso.ldap_settings(), _sso.oidc_settings()
globals().update(_SSO_LDAP, **_SSO_OIDC)
AUTHENTICATION_BACKENDS += _sso.backends(_SSO_LDAP, _SSO_OIDC)
QUILL_OIDC_ENABLED = bool(_SSO_OIDC)
AXES_WHITELIST_CALLABLE = "console.sso.config.oidc_callback_not_rate_limited"
QUILL_SSO_SESSION_AGE_S = _sso.session_age()  # SSO sessions end sooner than local ones
# ---------------------------------------------------------------- end of single sign-on
