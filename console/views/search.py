"""The header's search box: topics, consumer groups and brokers whose name (or id,
host) contains the words typed. One hit opens it at once."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from cluster_client import admin, zk
from cluster_client.errors import OpError
from console.roles import VIEWER, role_required
from console.views.common import page

LIMIT = 100  # per kind


def matches(text: str, words: list[str]) -> bool:
    text = text.lower()
    return all(w in text for w in words)


def find(q: str) -> tuple[dict, list[str]]:
    """{kind: [{"name", "url"}]} of what matches q, and what could not be searched."""
    words = q.lower().split()
    found: dict[str, list[dict]] = {"topics": [], "groups": [], "brokers": []}
    missed = []
    if not words:
        return found, missed
    try:
        for t in sorted(zk.topic_names()):
            if matches(t, words):
                found["topics"].append({"name": t, "url": reverse("topic", args=[t])})
        for b in zk.brokers():
            if matches(f"broker {b['id']} {b['host']}:{b['port']}", words):
                name = f"broker {b['id']} ({b['host']}:{b['port']})"
                found["brokers"].append({"name": name, "url": reverse("broker", args=[b["id"]])})
    except OpError as exc:
        missed.append(exc.message)
    try:
        for g in admin.list_groups():
            if matches(g["group_id"], words):
                url = reverse("group", args=[g["group_id"]])
                found["groups"].append({"name": g["group_id"], "url": url, "state": g["state"]})
    except OpError as exc:
        missed.append(exc.message)
    return found, missed


@role_required(VIEWER)
def search(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    found, missed = find(q)
    hits = [h for rows in found.values() for h in rows]
    if len(hits) == 1 and not missed:
        return redirect(hits[0]["url"])
    context = {
        "q": q,
        "found": {k: v[:LIMIT] for k, v in found.items()},
        "counts": {k: len(v) for k, v in found.items()},
        "total": len(hits),
        "missed": missed,
        "limit": LIMIT,
    }
    return page(request, "console/search.html", context)
