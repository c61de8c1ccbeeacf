"""Reading the console's settings from the environment (used by console.settings and
console.sso.config while the settings load, so it imports nothing of Django's settings)."""

from __future__ import annotations

import math
import os

from django.core.exceptions import ImproperlyConfigured


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


def env_seconds(name: str, default: float) -> float:
    """A period in seconds: a finite number above 0 (0 would make beat schedule a task
    every turn of its loop, and a span of 0 call every lagging partition stopped)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ImproperlyConfigured(f"{name} must be a number of seconds above 0, got {raw!r}")
    return value
