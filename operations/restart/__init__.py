"""Restart drivers: how the workers restart a broker process, whatever runs it.

`get_driver()` picks one from the environment: `QUILL_RESTART_DRIVER=docker` the Docker
driver (operations/restart/docker.py, imported only then), otherwise the local supervisor's
(`quill-stack restart broker-N`). A driver has `.name`, `.available() -> str | None`
(None when it can restart brokers here, else the sentence why not) and
`.restart(broker_id, timeout) -> dict` ({"old_pid", "new_pid", "message"}; RestartError
when it could not). A driver that also has `.stop(broker_id, timeout)` lets decommission
stop the drained broker. Only the default cluster's brokers are theirs: for another
cluster of QUILL_CLUSTERS `get_driver()` refuses with RestartError.
"""

from __future__ import annotations

import os

from cluster_client import clusters
from operations.restart.local import LocalDriver, RestartError

__all__ = ["LocalDriver", "RestartError", "get_driver"]


def get_driver():
    _refuse_other_clusters()
    wanted = os.environ.get("QUILL_RESTART_DRIVER", "local").strip().lower() or "local"
    if wanted == "docker":
        from operations.restart.docker import DockerDriver

        return DockerDriver()
    if wanted == "local":
        return LocalDriver()
    raise RestartError(f"QUILL_RESTART_DRIVER={wanted!r} is not a driver: use local or docker.")


def _refuse_other_clusters() -> None:
    """The drivers restart the brokers this console's machine or compose project runs:
    those of the default cluster. Another cluster's (QUILL_CLUSTERS) run elsewhere."""
    name, default = clusters.current_name(), clusters.default_name()
    if name != default:
        raise RestartError(
            f"Brokers are restarted from here for the cluster {default!r} only (this "
            f"machine's stack or compose project); restart {name!r}'s where they run."
        )
