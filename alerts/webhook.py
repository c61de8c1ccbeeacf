"""Webhook targets an operator may name, and their delivery, guarded against SSRF.

An alert rule's URL is fetched by the worker, inside the deployment: left open, an
operator could make it POST to Redis, ZooKeeper's admin server or a cloud metadata
service, and read the port map back from the delivery results. So:

- only http and https URLs with a host, no spaces or control characters (refused when
  the rule is made, with a sentence);
- every address the host resolves to (IPv4 and IPv6, odd spellings such as 0177.0.0.1,
  2130706433 or ::ffff:127.0.0.1 included: they are checked as resolved) must be a
  global one: loopback, private, shared, link-local, multicast, reserved and
  unspecified addresses are refused unless QUILL_WEBHOOK_ALLOWED_NETWORKS (an admin's
  setting, CIDRs) names them;
- the connection goes to the address that was checked (no second lookup a DNS answer
  could change), and redirects are not followed (http.client never follows them).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookRefused(ValueError):
    """A webhook URL or address the console will not call; the message says why."""


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [
        ipaddress.ip_network(n, strict=False)
        for n in getattr(settings, "QUILL_WEBHOOK_ALLOWED_NETWORKS", [])
    ]


def _unwrap(ip: Address) -> Address:
    """IPv4 carried in IPv6 (::ffff:a.b.c.d, 6to4, Teredo) is judged as IPv4."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None:
            return inner
    return ip


def why_refused(ip: Address) -> str | None:
    """Why the console will not call `ip` (None: it may)."""
    if any(ip in net for net in allowed_networks()):
        return None
    inner = _unwrap(ip)
    for flag in ("loopback", "unspecified", "link_local", "multicast", "private", "reserved"):
        if getattr(inner, f"is_{flag}"):
            return f"{ip} is a {flag.replace('_', '-')} address"
    if not inner.is_global:
        return f"{ip} is not a public address"
    return None


def parse(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a webhook URL, or WebhookRefused with a sentence."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise WebhookRefused("webhook_url must not contain spaces or control characters.")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise WebhookRefused("webhook_url must be an http or https URL.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise WebhookRefused("webhook_url has a port that is not a number 1-65535.") from None
    if not parts.hostname:
        raise WebhookRefused("webhook_url must name a host.")
    return parts.scheme, parts.hostname, port


def resolve(host: str, port: int) -> list[Address]:
    """Every address of `host`, each checked; WebhookRefused if any is not allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookRefused(f"webhook host {host!r} does not resolve ({exc}).") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos))
    for ip in addresses:
        why = why_refused(ip)
        if why:
            raise WebhookRefused(
                f"webhook host {host!r} resolves to {ip}: {why}, which alerts may not call "
                "(an admin can allow it with QUILL_WEBHOOK_ALLOWED_NETWORKS)."
            )
    return addresses


def check(url: str) -> None:
    """Refuse, with a sentence, a URL the worker would not deliver to."""
    _, host, port = parse(url)
    resolve(host, port)


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the checked address, whatever the host name resolves to now."""

    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self):
        self.sock = socket.create_connection((str(self.address), self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self.address = address

    def connect(self):
        sock = socket.create_connection((str(self.address), self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(url: str, body: bytes, timeout: float) -> int:
    """POST `body` (JSON) to a checked address of `url`; the HTTP status. Raises
    WebhookRefused, OSError or http.client.HTTPException."""
    scheme, host, port = parse(url)
    address = resolve(host, port)[0]
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kind = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    conn = kind(host, port, address, timeout)
    try:
        headers = {"Content-Type": "application/json", "User-Agent": "quill-alerts"}
        conn.request("POST", target, body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()
