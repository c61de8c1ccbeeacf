"""Redis's password (``requirepass``) for the processes that use Redis.

The secure stack gives Redis a password kept in ``secrets/redis.password`` (mode 0600)
and passes its path, never the password, in ``QUILL_REDIS_PASSWORD_FILE``; a deployment
may set ``QUILL_REDIS_PASSWORD`` instead. The console, monitor and workers put it in
the Redis URL they hand to Celery and the channel layer (Celery prints the URL with the
password masked). A password in ``QUILL_REDIS_URL`` itself is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

URL_ENV = "QUILL_REDIS_URL"
PASSWORD_FILE_ENV = "QUILL_REDIS_PASSWORD_FILE"
PASSWORD_ENV = "QUILL_REDIS_PASSWORD"
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def read_password_file(path: str | Path) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ValueError(f"{PASSWORD_FILE_ENV}: cannot read {path}: {exc.strerror}") from None


def password_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    path = environ.get(PASSWORD_FILE_ENV, "").strip()
    if path:
        return read_password_file(path)
    return environ.get(PASSWORD_ENV) or None


def with_password(url: str, password: str | None) -> str:
    """``redis://host:port/0`` -> ``redis://:<password>@host:port/0`` (URL-quoted)."""
    parts = urlsplit(url)
    if not password or parts.password:
        return url
    user = quote(parts.username or "", safe="")
    netloc = f"{user}:{quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


def redis_url_from_env(environ: Mapping[str, str] | None = None) -> str:
    """QUILL_REDIS_URL with the password from the environment put in."""
    environ = os.environ if environ is None else environ
    return with_password(environ.get(URL_ENV) or DEFAULT_URL, password_from_env(environ))
