"""What decrypting TLS costs Python, with no broker around it: the floor of a SASL_SSL
produce's extra CPU.

    python bench/tls_decrypt.py [--megabytes 300] [--chunk 1048576]

A client and a server `ssl.SSLObject` over memory BIOs, with the stack's own certificate
code and Python's default TLS settings (TLS 1.3; the cipher is printed). The client
encrypts ``--megabytes`` writes of ``--chunk`` bytes first (OpenSSL cuts them into 16 KiB
records); then the server side is timed alone, as asyncio's TLS layer reads: each
ciphertext into the incoming BIO, then ``read(256 KiB)`` until it wants more. Prints the
CPU model and the process CPU per MB of plaintext decrypted.
"""

from __future__ import annotations

import argparse
import os
import resource
import ssl
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine_cpu import cpu_model  # noqa: E402
from quill_stack import tls  # noqa: E402

READ_MAX = 256 * 1024  # asyncio's sslproto reads up to this much at a time


def _pair(pki: Path) -> tuple[ssl.SSLObject, ssl.SSLObject, tuple[ssl.MemoryBIO, ...]]:
    keystore = tls.issue(pki, "broker", ("localhost",)).keystore
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(keystore)
    client_ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    bios = server_in, server_out, client_in, client_out = tuple(ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(server_in, server_out, server_side=True)
    client = client_ctx.wrap_bio(client_in, client_out, server_hostname="localhost")
    for _ in range(10):  # the handshake, pumped by hand
        for end in (client, server):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    return server, client, bios


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--megabytes", type=int, default=300, help="ciphertexts to decrypt")
    p.add_argument("--chunk", type=int, default=1 << 20, help="bytes per client write")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="quill-bench-tls-") as pki:
        server, client, (server_in, _so, _ci, client_out) = _pair(Path(pki))
        payload = os.urandom(args.chunk)
        writes = max(1, args.megabytes * (1 << 20) // args.chunk)
        wires = []
        for _ in range(writes):
            client.write(payload)
            wires.append(client_out.read())
        start = _cpu()
        for wire in wires:
            server_in.write(wire)
            got = 0
            try:
                while True:
                    got += len(server.read(READ_MAX))
            except ssl.SSLWantReadError:
                pass
            if got != len(payload):
                raise SystemExit(f"decrypted {got} bytes of {len(payload)}")
        spent = _cpu() - start
    megabytes = writes * args.chunk / 1e6
    print(
        f"{cpu_model()} | {server.version()} {server.cipher()[0]} | {megabytes:,.0f} MB in "
        f"{args.chunk:,}-byte writes | {1000 * spent / megabytes:.3f} ms CPU per MB decrypted"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
