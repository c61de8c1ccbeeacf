"""The channel layer's settings, one place for the console and its tests."""

from __future__ import annotations

# channels_redis waits for messages with BZPOPMIN for up to 5 s; redis-py 8 gives every
# connection a 5 s socket timeout by default, so a websocket whose groups were quiet for
# 5 s died with "Timeout reading from ...". Reads may outlast the wait; a dead Redis is
# still noticed after SOCKET_TIMEOUT_S.
SOCKET_TIMEOUT_S = 20


def channel_layers(redis_url: str) -> dict:
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": redis_url, "socket_timeout": SOCKET_TIMEOUT_S}]},
        }
    }
