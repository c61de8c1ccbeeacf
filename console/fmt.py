"""Numbers with units, formatted the same way by templates and by the monitor's live
deltas (so a cell updated over the websocket reads exactly as it did when rendered)."""

from __future__ import annotations

import datetime as dt


def num(value) -> str:
    if value is None or value == "":  # "": a missing template variable
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def size(value) -> str:
    if value is None or value == "":  # "": a missing template variable
        return "—"
    value = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def duration_ms(value) -> str:
    """0 ms, 850 ms, 4.2 s, 3 min 10 s, 2 h 5 min, 3 d 4 h."""
    if value is None or value == "":  # "": a missing template variable
        return "—"
    ms = float(value)
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def rate(value, unit: str = "/s") -> str:
    if value is None or value == "":  # "": a missing template variable
        return "—"
    value = float(value)
    if value == 0:
        return f"0{unit}"
    if value < 10:
        return f"{value:.2f}{unit}"
    return f"{value:,.0f}{unit}"


def timestamp(ms) -> str:
    if ms is None or ms < 0:
        return "—"
    when = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{int(ms % 1000):03d}Z"


def ids(values) -> str:
    return ", ".join(str(v) for v in values) if values else "—"


STATUS_CLASS = {
    "OK": "ok",
    "WARN": "warn",
    "ERR": "err",
    "STOP": "err",
    "STALL": "err",
    "REWIND": "err",
    "Stable": "ok",
    "Empty": "muted",
    "Dead": "err",
    "PreparingRebalance": "warn",
    "CompletingRebalance": "warn",
}


def status_class(value) -> str:
    return STATUS_CLASS.get(value, "muted")


def cell(text: str, value=None, cls: str | None = None) -> dict:
    """A live cell update: text to show, raw value (for sorting) and a state class."""
    out = {"t": text}
    if value is not None:
        out["v"] = value
    if cls is not None:
        out["c"] = cls
    return out
