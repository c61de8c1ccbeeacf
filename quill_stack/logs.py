"""`quill-stack logs`: tail the per-process log files under <state dir>/logs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from quill_stack.process import tail


def log_files(logs_dir: Path, names: list[str]) -> list[tuple[str, Path]]:
    """(name, path) for the wanted processes; `broker` matches broker-1, broker-2, ..."""
    files = sorted(logs_dir.glob("*.log"))
    if not names:
        return [(f.stem, f) for f in files]
    return [(f.stem, f) for f in files if f.stem in names or f.stem.split("-")[0] in names]


def _prefixed(name: str, text: str, width: int) -> str:
    return "".join(f"{name.ljust(width)} | {line}\n" for line in text.splitlines())


def print_tails(files: list[tuple[str, Path]], lines: int) -> None:
    width = max(len(name) for name, _ in files)
    for name, path in files:
        sys.stdout.write(_prefixed(name, tail(path, lines), width))
    sys.stdout.flush()


def follow(files: list[tuple[str, Path]], interval: float = 0.3) -> None:
    """Print what is appended to any of the files until interrupted (handles truncation)."""
    width = max(len(name) for name, _ in files)
    offsets = {path: path.stat().st_size if path.exists() else 0 for _, path in files}
    pending = {path: "" for _, path in files}
    while True:
        for name, path in files:
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size < offsets[path]:
                offsets[path] = 0
            if size == offsets[path]:
                continue
            with open(path, errors="replace") as f:
                f.seek(offsets[path])
                data = pending[path] + f.read()
                offsets[path] = f.tell()
            complete, _, pending[path] = data.rpartition("\n")
            if complete:
                sys.stdout.write(_prefixed(name, complete, width))
        sys.stdout.flush()
        time.sleep(interval)
