"""Template filters for numbers with units (console.fmt) and state classes."""

from django import template

from console import fmt, roles

register = template.Library()

register.filter("num", fmt.num)
register.filter("bytes", fmt.size)
register.filter("duration", fmt.duration_ms)
register.filter("rate", fmt.rate)
register.filter("ts", fmt.timestamp)
register.filter("ids", fmt.ids)
register.filter("status_class", fmt.status_class)


@register.filter
def has_role(user, role: str) -> bool:
    return roles.has_role(user, role)


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


@register.simple_tag
def k(*parts) -> str:
    """A live key: {% k 'p' topic partition 'hw' %} -> p:orders:0:hw."""
    return ":".join(str(p) for p in parts)


@register.filter
def tojson(value) -> str:
    """Audit before/after as compact JSON ("—" for none)."""
    import json

    return "—" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


@register.filter
def percent(value) -> str:
    """0.42 -> 42.0 %"""
    try:
        return f"{float(value) * 100:.1f} %"
    except (TypeError, ValueError):
        return "—"


@register.filter
def ts_s(seconds) -> str:
    """Unix seconds -> the console's timestamp text."""
    try:
        return fmt.timestamp(int(float(seconds) * 1000))
    except (TypeError, ValueError):
        return "—"
