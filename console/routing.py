"""Websocket routes (channels). The console's live views add theirs here."""

websocket_urlpatterns: list = []
