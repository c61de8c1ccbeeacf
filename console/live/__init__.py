"""The live path: channel group names and delta messages (groups), the Redis history
the monitor keeps (history), and the websocket consumer browsers subscribe with
(consumers)."""
