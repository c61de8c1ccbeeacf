"""The websocket browsers keep open: /ws/live/?subs=cluster,topic:orders&cluster=<name>
(the cluster whose updates it gets; default: the default cluster, 4404 if unknown).

Authenticated by the Django session (AuthMiddlewareStack): no login -> closed with 4401,
no role -> 4403. Each subscription joins one channel-layer group; the monitor's deltas
arrive as live.delta messages and go to the browser as JSON.

The Messages page also asks for a live tail of one partition over the same socket:
{"tail": {"topic", "partition", "format"}} starts one (console.live.tail, viewer role as
for reading messages), {"untail": true} or closing the socket stops it."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from cluster_client import clusters
from cluster_client.errors import OpError
from console.live import tail as live_tail
from console.roles import VIEWER, has_role
from livefeed.groups import channel_group

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
        self.cluster = (query.get("cluster") or [clusters.default_name()])[0]
        if self.cluster not in clusters.names():
            await self.close(code=4404)
            return
        wanted = [s for raw in query.get("subs", []) for s in raw.split(",") if s]
        self.joined = []
        self.tail = None
        for sub in wanted[:MAX_SUBS]:
            group = channel_group(sub, self.cluster)
            if group is not None:
                await self.channel_layer.group_add(group, self.channel_name)
                self.joined.append(group)
        await self.accept()
        await self.send_json({"hello": True, "subs": wanted[:MAX_SUBS]})

    async def disconnect(self, code):
        await self._untail()
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """A ping gets a pong (clients measure round trips); tail/untail start and stop
        the Messages page's live tail."""
        if not isinstance(content, dict):
            return
        if content.get("ping") is not None:
            await self.send_json({"pong": content["ping"]})
        if content.get("untail"):
            await self._untail()
            await self.send_json({"tail": None})
        if isinstance(content.get("tail"), dict):
            await self._start_tail(content["tail"])

    async def _start_tail(self, want: dict) -> None:
        await self._untail()
        user = self.scope["user"]
        try:
            if not await database_sync_to_async(has_role)(user, VIEWER):
                raise OpError("Reading messages needs the viewer role.", status=403)
            with clusters.activate(self.cluster):  # the tail's task and threads too
                topic, partition, fmt = await asyncio.to_thread(
                    live_tail.validate, want.get("topic"), want.get("partition"), want.get("format")
                )
                tail = live_tail.Tail(topic, partition, fmt, self.send_json)
                start = await tail.start()
        except OpError as exc:
            await self.send_json({"tail_error": {"message": exc.message, "errors": exc.errors}})
            return
        self.tail = tail
        await self.send_json(
            {"tail": {"topic": topic, "partition": partition, "format": fmt, "from": start}}
        )

    async def _untail(self) -> None:
        tail, self.tail = getattr(self, "tail", None), None
        if tail is not None:
            await tail.stop()

    async def live_delta(self, event):
        await self.send_json(event["data"])
