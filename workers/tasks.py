import os
import socket
import time

from workers.celery import app


@app.task(name="quill.ping")
def ping(payload: str = "") -> dict:
    """Round trip through Redis and a worker; echoes `payload` with who answered."""
    return {"pong": payload, "worker": f"{socket.gethostname()}:{os.getpid()}", "at": time.time()}
