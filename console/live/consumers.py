"""The websocket browsers keep open: /ws/live/?subs=cluster,topic:orders.

Authenticated by the Django session (AuthMiddlewareStack): no login -> closed with 4401,
no role -> 4403. Each subscription joins one channel-layer group; the monitor's deltas
arrive as live.delta messages and go to the browser as JSON."""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.live.groups import channel_group
from console.roles import VIEWER, has_role

MAX_SUBS = 20


class LiveConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if not await database_sync_to_async(has_role)(user, VIEWER):
            await self.close(code=4403)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        wanted = [s for raw in query.get("subs", []) for s in raw.split(",") if s]
        self.joined = []
        for sub in wanted[:MAX_SUBS]:
            group = channel_group(sub)
            if group is not None:
                await self.channel_layer.group_add(group, self.channel_name)
                self.joined.append(group)
        await self.accept()
        await self.send_json({"hello": True, "subs": wanted[:MAX_SUBS]})

    async def disconnect(self, code):
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """Browsers only listen; a ping gets a pong (clients measure round trips)."""
        if content.get("ping") is not None:
            await self.send_json({"pong": content["ping"]})

    async def live_delta(self, event):
        await self.send_json(event["data"])
