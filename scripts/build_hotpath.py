"""Compile the broker's hot path (``broker.hotpath.HOT_MODULES``) with Cython.

    python scripts/build_hotpath.py [--jobs N] [--clean]

Each module's own .py source goes through Cython (annotations ignored, so the code
means exactly what it means as Python) and the C compiler into
``build/hotpath/<module>.<hash of the source>.<ABI>.so``; broker/hotpath.py loads it
only while the source still has that hash. A module whose build is already there is
skipped, so running this again after editing one file compiles that file only; builds
of older sources are deleted. Without Cython, a C compiler or the Python headers, it
says so and exits 0: the broker then runs as plain Python (issue 24).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker import hotpath  # noqa: E402

# annotation_typing=False: a `bytes` or `list` annotation stays a hint, as in Python
# (typed, Cython would refuse a bytearray or None the Python code takes)
CYTHON_DIRECTIVES = ("language_level=3", "annotation_typing=False", "binding=True")
CFLAGS = ("-O2", "-fPIC", "-shared", "-g0", "-fwrapv", "-fno-strict-aliasing", "-DNDEBUG")


def _say(msg: str) -> None:
    print(f"build_hotpath: {msg}", flush=True)


def compiler() -> list[str] | None:
    """The C compiler (``CC``, else the one Python was built with), when installed."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    return cc if shutil.which(cc[0]) else None


def build_one(
    name: str, cc: list[str], root: Path = ROOT, build_dir: Path = hotpath.BUILD_DIR
) -> tuple[str, str]:
    """Compile module ``name`` (its source under ``root``) into ``build_dir`` unless its
    build is there; return (name, what happened)."""
    path = root / (name.replace(".", "/") + ".py")
    source = path.read_bytes()
    target = hotpath.artifact(name, source, build_dir)
    if target.is_file():
        return name, "up to date"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="quill-hotpath-") as tmp:
        c_file = Path(tmp) / f"{name}.c"
        cython = [sys.executable, "-m", "cython", "--module-name", name]
        for directive in CYTHON_DIRECTIVES:
            cython += ["-X", directive]
        _run([*cython, str(path), "-o", str(c_file)])
        built = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        include = sysconfig.get_paths()["include"]
        _run([*cc, *CFLAGS, f"-I{include}", str(c_file), "-o", str(built)])
        os.replace(built, target)  # whole or not at all: a reader never sees half
    for old in target.parent.glob(f"{name}.*"):
        if old != target:
            old.unlink(missing_ok=True)  # the build of an older source
    return name, f"compiled in {time.monotonic() - started:.1f} s"


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd[:4])} ... failed:\n{done.stderr[-4000:]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--clean", action="store_true", help="delete every build and stop")
    p.add_argument("--module", action="append", help="only these modules (default: HOT_MODULES)")
    p.add_argument("--root", type=Path, default=ROOT, help="where the sources are")
    p.add_argument("--build-dir", type=Path, default=hotpath.BUILD_DIR)
    args = p.parse_args(argv)
    modules = tuple(args.module or hotpath.HOT_MODULES)
    if args.clean:
        shutil.rmtree(args.build_dir, ignore_errors=True)
        _say(f"removed {args.build_dir}")
        return 0
    try:
        import Cython  # noqa: F401
    except ImportError:
        _say("Cython is not installed: the broker runs as plain Python")
        return 0
    cc = compiler()
    if cc is None or not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        _say("no C compiler or Python headers (gcc, python3-dev): the broker runs as plain Python")
        return 0
    args.build_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(build_one, n, cc, args.root, args.build_dir) for n in modules]
        for future in concurrent.futures.as_completed(futures):
            try:
                name, outcome = future.result()
            except RuntimeError as exc:  # that module stays plain Python
                failed += 1
                _say(str(exc))
                continue
            if outcome != "up to date":
                _say(f"{name}: {outcome}")
    _say(f"{len(modules) - failed} of {len(modules)} hot modules compiled into {args.build_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
