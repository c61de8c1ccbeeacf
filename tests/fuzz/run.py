"""Run one harness under atheris (libFuzzer): ``python -m tests.fuzz.run NAME [libFuzzer args]``.

The broker's modules are instrumented for coverage as they are imported. The address
space is limited (``QUILL_FUZZ_MEMORY_MB``, 3072 by default) so that an allocation
from a size written in the input fails at once, as an abort libFuzzer reports as a
crash, rather than living on in overcommitted memory.
"""

from __future__ import annotations

import os
import resource
import sys

import atheris


def main() -> None:
    limit = int(os.environ.get("QUILL_FUZZ_MEMORY_MB", "3072")) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with atheris.instrument_imports(include=["broker"]):
        from tests.fuzz import harnesses
    name = sys.argv[1]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], harnesses.HARNESSES[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
