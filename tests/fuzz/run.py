"""Run one harness under atheris (libFuzzer): ``python -m tests.fuzz.run NAME [libFuzzer args]``.

The broker's parsing modules (protocol, log, security) are instrumented for coverage as
they are imported; the packages the harnesses import only for a name (broker.server.apis
for the API table pulls in the server, controller, replica, ZooKeeper and client code)
are left out: no harness runs their code, so their edges guide nothing, and
instrumenting them cost about 4 s of CPU at every harness's start. The address
space is limited (``QUILL_FUZZ_MEMORY_MB``, 3072 by default) so that an allocation
from a size written in the input fails at once, as an abort libFuzzer reports as a
crash, rather than living on in overcommitted memory.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import atheris

BROKER = Path(__file__).resolve().parents[2] / "broker"
# broker packages no harness runs (imported for names only): not instrumented
NOT_FUZZED = ("aio", "cli", "client", "controller", "coordinator", "metrics", "quota")
NOT_FUZZED += ("replica", "server", "zk")


def not_fuzzed_modules() -> list[str]:
    """Every module name under NOT_FUZZED, from the source tree (nothing imported)."""
    names = []
    for sub in NOT_FUZZED:
        path = BROKER / sub
        if path.with_suffix(".py").is_file():
            names.append(f"broker.{sub}")
        for file in path.rglob("*.py"):
            parts = file.relative_to(BROKER.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def main() -> None:
    limit = int(os.environ.get("QUILL_FUZZ_MEMORY_MB", "3072")) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with atheris.instrument_imports(include=["broker"], exclude=not_fuzzed_modules()):
        from tests.fuzz import harnesses
    name = sys.argv[1]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], harnesses.HARNESSES[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
