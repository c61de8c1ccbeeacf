"""Per-request facts a handler may need beyond the request itself.

Each connection serves its requests on its own asyncio task, so a context variable set
by the dispatcher is the current request's for the handler it awaits.
"""

from __future__ import annotations

from contextvars import ContextVar

from ..security.principal import ANONYMOUS, KafkaPrincipal

#: the client's address as Kafka shows it in group descriptions: "/127.0.0.1"
client_host: ContextVar[str] = ContextVar("client_host", default="")


def host_of(peer: str) -> str:
    """What ``client_host`` holds for ``peer``, "host:port" (the connection's peer name):
    computed once per connection, set per request."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host


#: throttle time (ms) a quota gave the current request: the connection mutes its reads
#: for that long after sending the response (KIP-219)
throttle_ms: ContextVar[int] = ContextVar("throttle_ms", default=0)


#: the name of the listener the request came in on (Kafka's ListenerName): Metadata and
#: FindCoordinator answer with the brokers' endpoints on that listener
listener_name: ContextVar[str] = ContextVar("listener_name", default="PLAINTEXT")


#: who sent the current request: ``User:ANONYMOUS`` until the connection authenticates
#: (SASL or a TLS client certificate); ACLs and user quotas match on it
principal: ContextVar[KafkaPrincipal] = ContextVar("principal", default=ANONYMOUS)
