"""The compiled hot path's gain per module (issue 24): one call of each module's hot
function per record, plain Python against the Cython build, in one run.

    python bench/hotpath_modules.py [--seconds 1.0]

Each case runs in a fresh interpreter twice, with ``QUILL_PURE_PYTHON=1`` (the .py)
and without (the build in build/hotpath/, scripts/build_hotpath.py), and prints CPU
µs per call (process time, best of 5) and the ratio. A module without a build of its
current source runs as Python in both columns (the row says so). Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cases() -> dict[str, tuple[str, object]]:
    """name -> (module, a no-argument call doing one record's work)."""
    from broker.protocol.fetch_response import PartitionData, encode_fetch_response
    from broker.protocol.framing import FrameDecoder, encode_frame
    from broker.protocol.messages import (
        RequestHeader,
        build,
        encode_request,
        parse_request,
        request_schema,
    )
    from broker.protocol.produce_response import encode_produce_response
    from broker.protocol.records import (
        assign_offsets,
        build_batch,
        read_batch_header,
        validate_produce,
    )

    batch = build_batch([(None, b"x" * 100, [], 0)])
    produce = build(
        request_schema(0, 9),
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 30000,
            "topic_data": [{"name": "small", "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    frame = encode_request(RequestHeader(0, 9, 7, "perf"), produce)
    body = frame[4:]
    answer = {
        "responses": [
            {
                "name": "small",
                "partition_responses": [
                    {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time": -1}
                    | {"log_start_offset": 0}
                ],
            }
        ],
        "throttle_time": 0,
    }
    fetched = [("small", [PartitionData(0, 0, 43, 43, 0, batch, len(batch))])]
    decoder = FrameDecoder()
    header = read_batch_header(batch)
    return {
        "framing: FrameDecoder.feed, one frame": (
            "broker.protocol.framing",
            lambda: decoder.feed(frame),
        ),
        "messages: parse_request, Produce v9": (
            "broker.protocol.messages",
            lambda: parse_request(body),
        ),
        "records: validate_produce, 1 record": (
            "broker.protocol.records",
            lambda: validate_produce(batch, max_message_bytes=1 << 20),
        ),
        "records: assign_offsets, 1 record": (
            "broker.protocol.records",
            lambda: assign_offsets(bytearray(batch), [header], 42, 0),
        ),
        "produce_response: encode, v9": (
            "broker.protocol.produce_response",
            lambda: encode_produce_response(9, 7, answer),
        ),
        "fetch_response: encode, v12, 1 partition": (
            "broker.protocol.fetch_response",
            lambda: encode_fetch_response(12, 7, fetched),
        ),
        "framing: encode_frame": ("broker.protocol.framing", lambda: encode_frame(body)),
    }


def measure(seconds: float) -> dict[str, dict]:
    from broker import hotpath

    out = {}
    for name, (module, call) in _cases().items():
        best = float("inf")
        for _ in range(5):
            n, start = 0, time.process_time()
            while time.process_time() - start < seconds / 5:
                for _ in range(200):
                    call()
                n += 200
            best = min(best, (time.process_time() - start) / n * 1e6)
        out[name] = {"us": best, "compiled": module in hotpath.compiled_modules()}
    return out


def _run(pure: bool, seconds: float) -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if k != "QUILL_PURE_PYTHON"}
    if pure:
        env["QUILL_PURE_PYTHON"] = "1"
    code = f"import json, bench.hotpath_modules as m; print(json.dumps(m.measure({seconds})))"
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=1.0, help="per case and column")
    args = p.parse_args(argv)
    from bench import machine_cpu

    pure, built = _run(True, args.seconds), _run(False, args.seconds)
    print(f"CPU: {machine_cpu.cpu_model()}")
    print("| module: call | Python µs | compiled µs | compiled / Python |")
    print("| --- | ---: | ---: | ---: |")
    for name, row in pure.items():
        b = built[name]
        note = "" if b["compiled"] else " (no build: Python in both)"
        print(f"| {name}{note} | {row['us']:.2f} | {b['us']:.2f} | {b['us'] / row['us']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
