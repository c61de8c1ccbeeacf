"""Cost of the bounds check (broker/protocol/bounds.py) on the request hot path.

    python bench/parse_bounds.py [--rounds 20000]

Times parse_request on a Produce v9 frame (one partition, a 16 KiB batch) and a
Fetch v12 frame (20 partitions over 4 topics), with and without ``check_body``
(kio's decode alone), interleaved in one run. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.protocol import messages  # noqa: E402
from broker.protocol.bounds import check_body  # noqa: E402
from broker.protocol.messages import (  # noqa: E402
    RequestHeader,
    build,
    encode_request,
    parse_request,
    request_schema,
)
from broker.protocol.records import build_batch  # noqa: E402


def _frames() -> dict[str, bytes]:
    batch = build_batch([(b"k%d" % i, b"v" * 150, [], 1000 + i) for i in range(100)])
    produce = {
        "acks": 1,
        "timeout": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
    }
    fetch = {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": f"topic-{t}",
                "partitions": [
                    {"partition": p, "fetch_offset": 1000, "partition_max_bytes": 1 << 20}
                    for p in range(5)
                ],
            }
            for t in range(4)
        ],
    }
    out = {}
    for name, key, version, body in (("Produce v9", 0, 9, produce), ("Fetch v12", 1, 12, fetch)):
        frame = encode_request(
            RequestHeader(key, version, 1, "bench"), build(request_schema(key, version), body)
        )
        out[name] = frame[4:]
    return out


def _time(frame: bytes, rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        parse_request(frame)
    return (time.perf_counter() - start) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    print(f"{'frame':<12}{'kio only us':>14}{'with check us':>15}{'check us':>10}")
    for name, frame in _frames().items():
        without = with_check = 0.0
        for _ in range(5):  # interleaved, so that load on the machine hits both alike
            messages.check_body = lambda *a: None
            without += _time(frame, args.rounds // 5)
            messages.check_body = check_body
            with_check += _time(frame, args.rounds // 5)
        without, with_check = without / 5, with_check / 5
        print(f"{name:<12}{without:>14.2f}{with_check:>15.2f}{with_check - without:>10.2f}")


if __name__ == "__main__":
    main()
