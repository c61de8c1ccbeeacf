"""The worker's own task: quill.ping (a health check through Redis and a worker).

The tasks that do the work live with their apps: operations.tasks (quill.operation.run,
quill.operation.scan_orphans) and alerts.tasks (quill.alerts.evaluate).
"""

import os
import socket
import time

from workers.celery import app


@app.task(name="quill.ping")
def ping(payload: str = "") -> dict:
    """Round trip through Redis and a worker; echoes `payload` with who answered."""
    return {"pong": payload, "worker": f"{socket.gethostname()}:{os.getpid()}", "at": time.time()}
