"""The test provider's settings: OP_STATE_DIR (its database), OP_SITE_URL (the issuer's
origin), OP_IDTOKEN_EXPIRE_S."""

import os
from pathlib import Path

STATE = Path(os.environ["OP_STATE_DIR"])
SECRET_KEY = "oidc-provider-for-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
SITE_URL = os.environ["OP_SITE_URL"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE / "op.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# A stand-in identity provider: Django's default hasher (PBKDF2, 1,000,000 rounds) cost
# ~0.5 s of CPU for each seeded user and each sign-in, dozens a run. MD5 here, as
# Django's testing docs advise and tests/conftest.py does for the tests' own process:
# a wrong password is refused the same; no test is about the provider's hash.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
USE_TZ = True
LOGIN_URL = "/login/"
# The console's sessions and this provider's both live on 127.0.0.1: distinct cookies.
SESSION_COOKIE_NAME = "op_sessionid"
CSRF_COOKIE_NAME = "op_csrftoken"
OIDC_EXTRA_SCOPE_CLAIMS = "tests.oidc_provider.claims.GroupClaims"
OIDC_IDTOKEN_EXPIRE = int(os.environ.get("OP_IDTOKEN_EXPIRE_S", "600"))
OIDC_USERINFO = "tests.oidc_provider.claims.userinfo"
