"""Config values in words an operator reads at a glance: `604800000` under a key
ending in `.ms` reads "7 days", `1073741824` under `.bytes` reads "1 GiB", Kafka's
Long.MAX_VALUE (and -1 where Kafka means "no limit") reads "unlimited". The raw value
stays one hover away (the templates put it in the title)."""

from __future__ import annotations

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
# -1 is "no limit" for these (Kafka's retention.ms / retention.bytes docs).
NO_LIMIT_AT_MINUS_ONE = (
    "retention.ms",
    "retention.bytes",
    "log.retention.ms",
    "log.retention.bytes",
)

# Int.MAX_VALUE is "no limit" for the connection limits (Kafka's defaults).
UNLIMITED_AT_INT_MAX = ("max.connection",)

DURATIONS = (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1000))
SIZES = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
RATE_SUFFIXES = (".bytes.per.second", ".throttled.rate")
SIZE_SUFFIXES = (".bytes", ".buffer.size")
TIME_SUFFIXES = {".ms": 1, ".hours": 3_600_000, ".minutes": 60_000, ".seconds": 1000}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def duration(ms: int) -> str:
    """604800000 -> 7 days; 90000 -> 1 minute 30 seconds; 1500 -> 1,500 ms."""
    if ms == 0:
        return "0 ms"
    if ms % 1000:
        return f"{ms:,} ms"
    parts, rest = [], ms
    for word, size in DURATIONS:
        if rest >= size:
            parts.append(_plural(rest // size, word))
            rest %= size
    if len(parts) <= 2:
        return " ".join(parts)
    word, size = next((w, s) for w, s in DURATIONS if ms >= s)
    return f"≈ {ms / size:,.1f} {word}s"


def size(n: int) -> str:
    """1073741824 -> 1 GiB; 1048588 -> ≈ 1.0 MiB; 100 -> 100 bytes."""
    for unit, bytes_ in SIZES:
        if n >= bytes_:
            if n % bytes_ == 0:
                return f"{n // bytes_:,} {unit}"
            return f"≈ {n / bytes_:,.1f} {unit}"
    return _plural(n, "byte")


def _double_max(text: str) -> bool:
    """Double.MAX_VALUE, Kafka's "no limit" for rates such as
    log.cleaner.io.max.bytes.per.second."""
    try:
        return float(text) >= 1e308
    except ValueError:
        return False


def config_value(name: str, value) -> str:
    """A config value in words; anything not a number (or of no known unit) as is."""
    if value is None or value == "":
        return "—"
    text = str(value)
    try:
        n = int(text)
    except ValueError:
        return "unlimited" if _double_max(text) else text
    if n == LONG_MAX or (n == -1 and name in NO_LIMIT_AT_MINUS_ONE):
        return "unlimited"
    if n == INT_MAX and name.startswith(UNLIMITED_AT_INT_MAX):
        return "unlimited"
    if n == -2 and name.endswith(("local.retention.ms", "local.retention.bytes")):
        return "as " + name.replace("local.", "", 1)  # KIP-405: -2 follows the total
    if n < 0:
        return text
    if name.endswith(RATE_SUFFIXES):
        return "unlimited" if n >= INT_MAX else f"{size(n)}/s"
    if name.endswith(SIZE_SUFFIXES):
        return size(n)
    for suffix, scale in TIME_SUFFIXES.items():
        if name.endswith(suffix):
            return duration(n * scale)
    return f"{n:,}" if n >= 10_000 else text
