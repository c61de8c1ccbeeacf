"""`manage.py monitor`: watch the cluster and keep the console's pages live.

ZooKeeper watches (brokers, controller, topics, partition states, config changes) are
published as they fire; offsets, per-replica LEO and group offsets are sampled every
second. Deltas go to the channel layer (Redis), history to Redis."""

import asyncio
import logging
import signal

from django.core.management.base import BaseCommand, CommandError

from cluster_client import clusters
from console.monitor.run import Monitor


async def _run_all(monitors: list[Monitor], samples: int | None) -> None:
    """Every cluster's monitor at once; one failing ends the process (its supervisor
    restarts it) rather than leaving that cluster's pages silently static."""
    await asyncio.gather(*(m.run(samples) for m in monitors))


class Command(BaseCommand):
    help = "Watch ZooKeeper and sample the brokers; publish live deltas to the console."

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval", type=float, default=1.0, help="seconds between offset samples (default 1)"
        )
        parser.add_argument(
            "--samples",
            type=int,
            default=None,
            help="stop after this many samples (default: run until stopped)",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="health check: exit 0 if a monitor sampled in the last 10 s",
        )

    def handle(self, *args, interval: float, samples: int | None, check: bool, **options):
        if check:  # compose probes `python -m quill_stack.health monitor`: no Django
            from django.conf import settings

            from quill_stack import health

            ok, detail = health.monitor(settings.QUILL_REDIS_URL, clusters.names())
            if not ok:
                raise CommandError(detail)
            self.stdout.write(detail)
            return
        logging.getLogger("kazoo").setLevel(logging.WARNING)
        # SIGTERM (docker stop, the supervisor) stops it as Ctrl-C does. As a container's
        # PID 1 it would have no default action: the engine waited 10 s, then SIGKILL.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        monitors = [Monitor(interval=interval, cluster=name) for name in clusters.names()]
        try:
            asyncio.run(_run_all(monitors, samples))
        except KeyboardInterrupt:
            pass
