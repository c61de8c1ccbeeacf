"""The compiled hot path (broker/hotpath.py, scripts/build_hotpath.py; issue 24): a build
is imported in place of its .py only while that source is unchanged, and an edited
source is imported as Python until it is built again."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "scripts" / "build_hotpath.py"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None
    or subprocess.run([sys.executable, "-c", "import Cython"]).returncode,
    reason="needs gcc and Cython (the install step brings both)",
)

IMPORT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from broker.hotpath import HotPathFinder
    sys.meta_path.insert(0, HotPathFinder(("hotpkg.mod",), Path(sys.argv[1])))
    import hotpkg.mod
    print(hotpkg.mod.__file__.endswith(".so"), hotpkg.mod.answer(), hotpkg.mod.Box(2).twice())
    """
)


def _write_module(src: Path, answer: int) -> None:
    (src / "hotpkg").mkdir(parents=True, exist_ok=True)
    (src / "hotpkg" / "__init__.py").write_text("")
    (src / "hotpkg" / "mod.py").write_text(
        textwrap.dedent(
            f"""
            from dataclasses import dataclass

            def answer() -> int:
                return {answer}

            @dataclass
            class Box:
                n: int

                def twice(self) -> int:
                    return self.n * 2
            """
        )
    )


def _build(src: Path, build: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(BUILD), "--module", "hotpkg.mod", "--root", str(src)]
        + ["--build-dir", str(build)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _import(src: Path, build: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{src}:{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT, str(build)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_build_is_used_only_for_the_source_it_was_built_from(tmp_path):
    src, build = tmp_path / "src", tmp_path / "build"
    _write_module(src, 1)
    assert _import(src, build) == "False 1 4"  # no build yet: plain Python

    out = _build(src, build)
    assert "hotpkg.mod: compiled in" in out and "1 of 1 hot modules compiled" in out
    assert len(list(build.glob("hotpkg.mod.*.so"))) == 1
    assert _import(src, build) == "True 1 4"  # the compiled module, same behaviour

    _write_module(src, 2)  # a developer's edit: the old build must not shadow it
    assert _import(src, build) == "False 2 4"

    _build(src, build)  # rebuilt for the new source; the old build is gone
    assert len(list(build.glob("hotpkg.mod.*.so"))) == 1
    assert _import(src, build) == "True 2 4"
    assert "hotpkg.mod: compiled" not in _build(src, build)  # up to date: nothing compiled


def test_pure_python_when_asked(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "QUILL_PURE_PYTHON": "1"}
    code = "import broker.protocol.records as n, broker.hotpath as h; print(n.__file__, h.compiled_modules())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(ROOT / "broker" / "protocol" / "records.py"), "{}"]
