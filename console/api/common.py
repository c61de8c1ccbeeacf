"""Shared by the API routers: the acting user and the read-permission check."""

from __future__ import annotations

from console.changes import Actor
from console.roles import VIEWER


def actor(request) -> Actor:
    return Actor(request.auth, "api")


def viewer(request) -> Actor:
    """Reads need the viewer role (a login with no role gets 403)."""
    a = actor(request)
    a.require(VIEWER)
    return a
