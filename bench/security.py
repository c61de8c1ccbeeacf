"""What security costs: produce and consume over SASL_SSL next to PLAINTEXT on the same
broker in one run, and SASL authentications per second.

    python bench/security.py [--records 200000] [--record-size 1000] [--rounds 3]
                             [--auth-seconds 5] [--profile] [--baseline REF]
                             [--only-throughput] [--json out.json]

One broker with three listeners: PLAINTEXT, SASL_SSL (SCRAM-SHA-512, TLS 1.3 with an
ECDSA P-256 certificate from a CA made for the run) and SASL_PLAINTEXT (PLAIN and
SCRAM-SHA-512). A 6-partition topic; confluent-kafka (librdkafka) produces
``--records`` values of ``--record-size`` bytes (acks=1, linger.ms 5) and one consumer
reads them all back, once per listener per round, the listeners alternating; each
figure is the best of ``--rounds``, and the ratio is SASL_SSL over PLAINTEXT. Beside
each, the broker's CPU (utime + stime from /proc) per MB of values, summed over every
round: less disturbed by the machine's other work than records/s.

``--baseline REF`` first runs the same on the broker of git ref REF (exported with
``git archive``), then on this tree: before and after in one run.
``--only-throughput`` skips the authentication rates.

Authentications per second: for ``--auth-seconds`` each, 4 threads open connections in
a loop, each one a full exchange with our own client (broker/client, the inter-broker
code) and closed again: PLAIN over SASL_PLAINTEXT, PLAIN over SASL_SSL (adds a TLS
handshake) and SCRAM-SHA-512 over SASL_PLAINTEXT (the client's PBKDF2 of 4096
iterations is paid on this machine's same 2 cores, so this is a floor).

``--profile``: py-spy samples the broker during one SASL_SSL produce+consume and the
top functions by own time are printed (where the time goes). Figures are printed, never
asserted; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.acks_all import export_tree  # noqa: E402
from bench.localstack import emit, local_cluster  # noqa: E402
from bench.machine_cpu import cpu_model  # noqa: E402
from bench.throughput import create_topic  # noqa: E402
from broker.client.connection import BrokerConnection  # noqa: E402
from broker.client.security import ClientSecurity  # noqa: E402
from tests.security_helpers import PLAIN_JAAS, jaas, set_scram_user  # noqa: E402

USER, PASSWORD = "bench", "bench-secret"
TOPIC = "security-bench"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--record-size", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--auth-seconds", type=float, default=5.0)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--baseline", help="git ref whose broker runs first, for a before column")
    p.add_argument("--only-throughput", action="store_true", help="no authentication rates")
    p.add_argument("--json")
    return p


def _produce(conf: dict, records: int, size: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 262144})
    value = os.urandom(size)
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(300) == 0
    return records / (time.perf_counter() - start)


def _consume(conf: dict, records: int) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {**conf, "group.id": f"bench-{time.monotonic_ns()}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    got, start = 0, None
    deadline = time.monotonic() + 600
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10000, timeout=1.0):
            if msg.error() is None:
                start = start or time.perf_counter()
                got += 1
    consumer.close()
    return got / (time.perf_counter() - start)


def _auth_rate(host: str, port: int, security: ClientSecurity, seconds: float) -> float:
    count = collections.Counter()

    def worker() -> None:
        async def loop() -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                conn = BrokerConnection(host, port, "auth-bench", security=security)
                await conn.connect(30)
                await conn.close()
                count["ok"] += 1

        asyncio.run(loop())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return count["ok"] / (time.perf_counter() - start)


def _profile(pid: int, work) -> dict:
    """py-spy's samples of the broker's event loop while ``work`` runs: the share spent
    in TLS (ssl/sslproto frames) and the top functions by own time."""
    out = Path(tempfile.mkdtemp()) / "spy.txt"
    spy = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "-o",
            str(out),
            "-r",
            "200",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    time.sleep(1.0)
    work()
    spy.send_signal(signal.SIGINT)  # py-spy writes its samples when interrupted
    _out, err = spy.communicate(timeout=60)
    if not out.exists():
        raise RuntimeError(f"py-spy wrote no samples: {err.decode(errors='replace')[-500:]}")
    leaves: collections.Counter = collections.Counter()
    busy = tls = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        # the event loop's own work: not other threads, not waiting in select()
        if not any("_run_once" in f for f in frames) or "select (selectors" in frames[-1]:
            continue
        busy += int(n)
        leaves[frames[-1]] += int(n)
        if any("ssl.py" in f or "sslproto.py" in f for f in frames):
            tls += int(n)
    return {
        "tls_pct_of_event_loop_busy": round(100 * tls / max(busy, 1), 1),
        "top_own_time_pct": [
            (name, round(100 * n / max(busy, 1), 1)) for name, n in leaves.most_common(10)
        ],
    }


def main() -> int:
    args = _parser().parse_args()
    trees = [(None, "this tree")]
    if args.baseline:
        trees.insert(0, (export_tree(args.baseline), f"before ({args.baseline})"))
        trees[1] = (None, "after (this tree)")
    results = {}
    for src, label in trees:
        with tempfile.TemporaryDirectory(prefix="quill-bench-pki-") as pki_dir:
            results[label] = run(args, Path(pki_dir), src)
    for label, result in results.items():
        rates, cpu = result["records_per_s"], result["broker_cpu_ms_per_mb"]
        print(
            f"{cpu_model()} | {label} | produce records/s PLAINTEXT {rates['PLAINTEXT']['produce']:,}"
            f" SASL_SSL {rates['SASL_SSL']['produce']:,}"
            f" ({result['sasl_ssl_over_plaintext']['produce']}x) | broker ms CPU per MB"
            f" {cpu['PLAINTEXT']['produce']} / {cpu['SASL_SSL']['produce']}"
            f" | consume {rates['PLAINTEXT']['consume']:,} / {rates['SASL_SSL']['consume']:,}"
            f" ({result['sasl_ssl_over_plaintext']['consume']}x), ms per MB"
            f" {cpu['PLAINTEXT']['consume']} / {cpu['SASL_SSL']['consume']}"
        )
    return emit(results if args.baseline else results["this tree"], args.json)


def _broker_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args, pki_dir: Path, src: Path | None = None) -> dict:
    """The benchmark, with the broker's certificate from the stack's CA code in ``pki_dir``
    and the broker of source tree ``src`` (this one by default)."""
    from quill_stack import ports, tls

    keystore = tls.issue(pki_dir, "broker", ("localhost", "127.0.0.1")).keystore
    ca_file = pki_dir / "ca.crt"
    sasl_ssl, sasl_plain = ports.free_ports(2)
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_ssl},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_plain}"
    )
    overrides = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(PLAIN_JAAS, user_bench=PASSWORD),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(
            PLAIN_JAAS, user_bench=PASSWORD
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    with local_cluster(1, overrides, src=src) as cluster:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=cluster.zk_connect)
        zk.start(timeout=10)
        set_scram_user(zk, USER, PASSWORD, ("SCRAM-SHA-512",))
        zk.stop()
        time.sleep(1.0)  # the credential's change notification
        create_topic(cluster.bootstrap, TOPIC, 6)
        confs = {
            "PLAINTEXT": {"bootstrap.servers": cluster.bootstrap},
            "SASL_SSL": {
                "bootstrap.servers": f"127.0.0.1:{sasl_ssl}",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": USER,
                "sasl.password": PASSWORD,
                "ssl.ca.location": str(ca_file),
            },
        }
        best: dict[str, dict[str, float]] = {k: {"produce": 0, "consume": 0} for k in confs}
        cpu_s: dict[str, dict[str, float]] = {k: {"produce": 0, "consume": 0} for k in confs}
        broker_pid = next(iter(cluster.brokers.values())).pid
        for _ in range(args.rounds):
            for name, conf in confs.items():
                for op in ("produce", "consume"):
                    started = _broker_s(broker_pid)
                    if op == "produce":
                        rate = _produce(conf, args.records, args.record_size)
                    else:
                        rate = _consume(conf, args.records)
                    best[name][op] = max(best[name][op], rate)
                    cpu_s[name][op] += _broker_s(broker_pid) - started
        mb = args.record_size / 1e6
        total_mb = args.rounds * args.records * mb
        results: dict = {
            "settings": vars(args),
            "records_per_s": {k: {o: round(v) for o, v in d.items()} for k, d in best.items()},
            "mb_per_s": {k: {o: round(v * mb, 1) for o, v in d.items()} for k, d in best.items()},
            "broker_cpu_ms_per_mb": {
                k: {o: round(1000 * v / total_mb, 2) for o, v in d.items()}
                for k, d in cpu_s.items()
            },
            "sasl_ssl_over_plaintext": {
                o: round(best["SASL_SSL"][o] / best["PLAINTEXT"][o], 2)
                for o in ("produce", "consume")
            },
        }
        plain = {"sasl_mechanism": "PLAIN", "username": USER, "password": PASSWORD}
        cases = {
            "PLAIN over SASL_PLAINTEXT": (sasl_plain, ClientSecurity("SASL_PLAINTEXT", **plain)),
            "PLAIN over SASL_SSL": (
                sasl_ssl,
                ClientSecurity("SASL_SSL", **plain, ssl_cafile=str(ca_file)),
            ),
            "SCRAM-SHA-512 over SASL_PLAINTEXT": (
                sasl_plain,
                ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", USER, PASSWORD),
            ),
        }
        if not args.only_throughput:
            results["authentications_per_s"] = {
                name: round(_auth_rate("127.0.0.1", port, sec, args.auth_seconds), 1)
                for name, (port, sec) in cases.items()
            }
        if args.profile:
            pid = next(iter(cluster.brokers.values())).pid
            conf = confs["SASL_SSL"]
            results["sasl_ssl_profile"] = _profile(
                pid,
                lambda: (
                    _produce(conf, args.records, args.record_size),
                    _consume(conf, args.records),
                ),
            )
    return results


if __name__ == "__main__":
    sys.exit(main())
