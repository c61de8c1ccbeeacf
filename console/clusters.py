"""Which cluster a request works on: /c/<name>/... URLs, shareable and bookmarkable.

ClusterFromPath takes the /c/<name> prefix off the path before URL resolution, makes
<name> the current cluster (cluster_client.clusters) for the request, and puts the
prefix into the script prefix, so every reverse() and {% url %} of the page stays
in that cluster. URLs without the prefix mean the default cluster (the first listed;
"default" without QUILL_CLUSTERS), as they always did. An unknown name is a 404.

Signing in and out (/accounts/...) belongs to no cluster: the OIDC provider knows one
callback URL, and one session serves every cluster. /c/<name>/accounts/... redirects
to /accounts/...; the login page's next= keeps the cluster's page to come back to.
"""

from __future__ import annotations

import re

from django.http import HttpResponseNotFound, HttpResponseRedirect, JsonResponse
from django.urls import get_script_prefix, set_script_prefix

from cluster_client import clusters
from livefeed import history

PREFIX_RE = re.compile(r"^/c/([^/]+)(/.*)?$")
UNPREFIXED = "/accounts/"  # pages of no cluster


def prefix(name: str) -> str:
    """The path prefix of cluster `name`'s pages ("" for the default cluster)."""
    return "" if name == clusters.default_name() else f"/c/{name}"


class ClusterFromPath:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        match = PREFIX_RE.match(request.path_info)
        old_prefix = get_script_prefix()
        if match is None:
            name = clusters.default_name()
        else:
            name = match.group(1)
            if name not in clusters.registry():
                return _unknown(request, name, match.group(2) or "/")
            if (match.group(2) or "/").startswith(UNPREFIXED):
                return _unprefixed(request, old_prefix, match.group(2))
            request.path_info = match.group(2) or "/"
            set_script_prefix(f"{old_prefix}c/{name}/")
        request.cluster = name
        try:
            with clusters.activate(name):
                return self.get_response(request)
        finally:
            set_script_prefix(old_prefix)


def _unprefixed(request, script_prefix: str, rest: str):
    query = request.META.get("QUERY_STRING", "")
    return HttpResponseRedirect(script_prefix + rest.lstrip("/") + (f"?{query}" if query else ""))


def _unknown(request, name: str, rest: str):
    text = f"No cluster named {name!r} in this console."
    if rest.startswith("/api/"):
        return JsonResponse({"detail": text}, status=404)
    return HttpResponseNotFound(text, content_type="text/plain; charset=utf-8")


def switcher(request) -> dict:
    """Template context: the clusters for the nav's switcher (none for one cluster, or
    before login), each with its URL for the page's section, whether it is current and
    its health dot."""
    current = getattr(request, "cluster", None) or clusters.default_name()
    user = getattr(request, "user", None)
    if len(clusters.names()) < 2 or user is None or not user.is_authenticated:
        return {"cluster_name": current}
    first = request.path_info.strip("/").split("/")[0]
    section = f"/{first}/" if first else "/"  # the same list page in the other cluster
    entries = [
        {"name": name, "url": prefix(name) + section, "current": name == current, "health": ""}
        for name in clusters.names()
    ]
    for entry in entries:
        with clusters.activate(entry["name"]):
            entry["health"] = health(history.monitor_age())
    here = next(e["health"] for e in entries if e["current"])
    return {"clusters": entries, "cluster_name": current, "cluster_health": here}


def health(monitor_age: float | None) -> str:
    """The switcher's dot: the cluster's monitor sampled it lately (ok), a while ago
    (stale: the monitor or the cluster is struggling), never or long ago (down)."""
    if monitor_age is None or monitor_age > 60:
        return "down"
    return "ok" if monitor_age <= 10 else "stale"
