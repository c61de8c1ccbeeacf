"""Websocket routes (channels)."""

from django.urls import path

from console.live.consumers import LiveConsumer

websocket_urlpatterns = [path("ws/live/", LiveConsumer.as_asgi())]
