"""The topic page's partition table at scale: each partition's problems, problem
partitions first (offline, under min ISR, under-replicated, not on its preferred
leader), then paged, so a topic of 10,000 partitions is a page of 50 rows."""

from __future__ import annotations

from django.http import QueryDict

from console.monitor.deltas import PROBLEMS

PER_PAGE = 50
PER_PAGE_CHOICES = (25, 50, 100, 200)


def min_isr_of(configs: list[dict]) -> int:
    for c in configs:
        if c["name"] == "min.insync.replicas":
            try:
                return int(c["value"])
            except (TypeError, ValueError):
                break
    return 1


def mark_problems(rows: list[dict], min_isr: int) -> None:
    """Add under_min_isr, not_preferred and problems (their names) to each row."""
    for r in rows:
        r["under_min_isr"] = not r["offline"] and len(r["isr"]) < min_isr
        r["not_preferred"] = (
            not r["offline"] and bool(r["replicas"]) and r["leader"] != r["replicas"][0]
        )
        r["problems"] = [(label, cls) for key, label, cls in PROBLEMS if r[key]]
        r["rank"] = next((i for i, (key, _l, _c) in enumerate(PROBLEMS) if r[key]), len(PROBLEMS))


def whole(text: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return min(hi, max(lo, int(text)))
    except (TypeError, ValueError):
        return default


def partition_page(rows: list[dict], query: QueryDict, min_isr: int) -> dict:
    """The rows of the asked page (?page=, ?per=, ?broker=, ?problems=1) and what the
    pager needs. Problem partitions come first whatever the filter."""
    mark_problems(rows, min_isr)
    counts = {key: sum(r[key] for r in rows) for key, _l, _c in PROBLEMS}
    broker = whole(query.get("broker"), -1, -1, 2**31 - 1)
    problems_only = query.get("problems") == "1"
    shown = [
        r
        for r in rows
        if (broker < 0 or broker in r["replicas"]) and (not problems_only or r["problems"])
    ]
    shown.sort(key=lambda r: (r["rank"], r["partition"]))
    per = whole(query.get("per"), PER_PAGE, 1, max(PER_PAGE_CHOICES))
    pages = max(1, -(-len(shown) // per))
    number = whole(query.get("page"), 1, 1, pages)
    start = (number - 1) * per
    return {
        "rows": shown[start : start + per],
        "number": number,
        "pages": pages,
        "per": per,
        "per_choices": PER_PAGE_CHOICES,
        "first": start + 1 if shown else 0,
        "last": min(start + per, len(shown)),
        "matching": len(shown),
        "total": len(rows),
        "broker": broker if broker >= 0 else "",
        "problems_only": problems_only,
        "problem_count": sum(1 for r in rows if r["problems"]),
        "counts": counts,
        "links": page_links(query, number, pages),
    }


def page_links(query: QueryDict, number: int, pages: int) -> list[dict]:
    """First, last and the pages around the current one; None marks a gap."""
    wanted = sorted({1, pages, *range(max(1, number - 2), min(pages, number + 2) + 1)})
    links, previous = [], 0
    for n in wanted:
        if n - previous > 1:
            links.append({"gap": True})
        q = query.copy()
        q["page"] = str(n)
        links.append({"n": n, "href": "?" + q.urlencode() + "#partitions", "on": n == number})
        previous = n
    return links
