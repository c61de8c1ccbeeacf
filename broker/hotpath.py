"""The compiled hot path: the same .py sources, built by Cython where a build exists.

``HOT_MODULES`` are the modules of the per-record profile (issue 24, docs/benchmarks.md)
that run faster compiled: record batch validation and the produce/fetch codecs.
``scripts/build_hotpath.py`` (run by ``make install``) compiles each into
``build/hotpath/`` under a name keyed by the sha256 of its source, and the finder this module installs (from ``broker/__init__.py``) loads
that extension instead of the .py only while the source still hashes to its key. An
edited source has a new key, so it is imported as plain Python until the next build:
a stale build never shadows an edit. No build, no compiler, or
``QUILL_PURE_PYTHON=1``: everything runs as plain Python, unchanged.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

BUILD_DIR = Path(__file__).resolve().parent.parent / "build" / "hotpath"
# bump when the build's options change, so every module is compiled again
BUILD_FORMAT = b"quill-hotpath-1"
HOT_MODULES = (
    # record batch validation and the produce and fetch codecs: 6-27 % less CPU per call
    # compiled (bench/hotpath_modules.py). The other modules the profile names (framing,
    # network, dispatch, handlers, replica, log, the inter-broker client) compiled as
    # well cost more CPU per request than as Python on 3.11 (bench/floor.py, issue 24 in
    # docs/benchmarks.md), so they stay Python until a typed build shows a gain.
    "broker.protocol.records",
    "broker.protocol.messages",
    "broker.protocol.produce_response",
    "broker.protocol.fetch_response",
)


def source_key(source: bytes) -> str:
    """The build key of one module: its source's hash (and the build's format)."""
    return hashlib.sha256(BUILD_FORMAT + source).hexdigest()[:20]


def artifact(fullname: str, source: bytes, build_dir: Path = BUILD_DIR) -> Path:
    """Where the extension built from this exact ``source`` of ``fullname`` lives."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]  # the interpreter's ABI tag
    return build_dir / f"{fullname}.{source_key(source)}{suffix}"


class HotPathFinder(importlib.abc.MetaPathFinder):
    """Imports a hot module from its build when the build matches its source."""

    def __init__(self, modules: tuple[str, ...] = HOT_MODULES, build_dir: Path = BUILD_DIR) -> None:
        self.modules = frozenset(modules)
        self.build_dir = build_dir
        self.loaded: dict[str, str] = {}  # module -> the extension it came from

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not (spec.origin or "").endswith(".py"):
            return None
        try:
            so = artifact(fullname, Path(spec.origin).read_bytes(), self.build_dir)
        except OSError:
            return None
        if not so.is_file():
            return None  # no build of this source: plain Python
        self.loaded[fullname] = str(so)
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(so))
        return importlib.util.spec_from_file_location(fullname, so, loader=loader)


def install() -> HotPathFinder | None:
    """Put the finder first on ``sys.meta_path`` (once), unless QUILL_PURE_PYTHON is set."""
    if os.environ.get("QUILL_PURE_PYTHON", "") not in ("", "0"):
        return None
    for finder in sys.meta_path:
        if isinstance(finder, HotPathFinder):
            return finder
    finder = HotPathFinder()
    sys.meta_path.insert(0, finder)
    return finder


def compiled_modules() -> dict[str, str]:
    """The hot modules imported from a build so far: name -> extension path."""
    for finder in sys.meta_path:
        if isinstance(finder, HotPathFinder):
            return dict(finder.loaded)
    return {}
