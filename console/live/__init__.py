"""The websocket side of the live feed (livefeed): the consumer browsers subscribe with
(consumers) and the message tail it streams (tail)."""
