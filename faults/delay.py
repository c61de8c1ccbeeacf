"""A slow, lossy link without tc netem: this kernel has no sch_netem.

    ip netns exec q77-b1 python -m faults.delay --queue 0 --delay-ms 120 --loss 0.05

Run inside a host's namespace while its iptables sends what leaves eth0 to NFQUEUE
(`faults.nemesis.slow_link`). Each queued packet is dropped with probability --loss, or
let through --delay-ms after it was queued, in the order it came: what `tc qdisc add dev
eth0 root netem delay Xms loss 5%` does. The kernel keeps the packets (the
NetfilterQueue library gives us their ids, never their bytes); this process only says
when each may go. SIGTERM stops it, and the nemesis removes the iptables rule first, so
nothing is left queued (the rule has --queue-bypass: with no reader, packets pass).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
from collections import deque

from netfilterqueue import COPY_META, NetfilterQueue

MAX_QUEUED = 16384  # packets the kernel holds for us: 200 ms of a busy broker's link


class Delayer:
    """Packets in arrival order, each let through `delay_s` after it came."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay_s: float, loss: float,
                 rng: random.Random) -> None:  # fmt: skip
        self.loop, self.delay_s, self.loss, self.rng = loop, delay_s, loss, rng
        self.waiting: deque = deque()  # (due, packet), due never decreasing
        self.timer: asyncio.TimerHandle | None = None
        self.counts = {"accepted": 0, "dropped": 0}

    def queued(self, packet) -> None:
        if self.rng.random() < self.loss:
            packet.drop()
            self.counts["dropped"] += 1
            return
        self.waiting.append((self.loop.time() + self.delay_s, packet))
        if self.timer is None:
            self.timer = self.loop.call_at(self.waiting[0][0], self.release)

    def release(self) -> None:
        """Let through every packet whose time has come; wake again for the next."""
        self.timer = None
        now = self.loop.time()
        while self.waiting and self.waiting[0][0] <= now:
            self.waiting.popleft()[1].accept()
            self.counts["accepted"] += 1
        if self.waiting:
            self.timer = self.loop.call_at(self.waiting[0][0], self.release)

    def flush(self) -> None:
        while self.waiting:
            self.waiting.popleft()[1].accept()


async def serve(queue_num: int, delay_s: float, loss: float, seed: int) -> dict:
    loop = asyncio.get_running_loop()
    delayer = Delayer(loop, delay_s, loss, random.Random(seed))
    nfq = NetfilterQueue()
    nfq.bind(queue_num, delayer.queued, max_len=MAX_QUEUED, mode=COPY_META, range=0)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_reader(nfq.get_fd(), nfq.run, False)
    print(f"delaying queue {queue_num}: {delay_s * 1000:.0f} ms, loss {loss:.0%}", flush=True)
    try:
        await stop.wait()
    finally:
        loop.remove_reader(nfq.get_fd())
        delayer.flush()
        nfq.unbind()
    return delayer.counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m faults.delay", description=__doc__)
    parser.add_argument("--queue", type=int, default=0, help="NFQUEUE number (default 0)")
    parser.add_argument("--delay-ms", type=float, required=True, help="added to each packet")
    parser.add_argument("--loss", type=float, default=0.0, help="drop probability, 0-1")
    parser.add_argument("--seed", type=int, default=0, help="of the loss's random draws")
    args = parser.parse_args(argv)
    if not 0 <= args.delay_ms <= 10_000 or not 0 <= args.loss < 1:
        parser.error("--delay-ms must be 0-10000 and --loss 0 or more and below 1")
    counts = asyncio.run(serve(args.queue, args.delay_ms / 1000, args.loss, args.seed))
    print(f"stopped: {counts['accepted']} let through, {counts['dropped']} dropped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
