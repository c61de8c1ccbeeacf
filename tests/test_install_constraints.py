"""constraints.txt pins what the suite runs with: scripts/install.sh installs with
`pip install -c constraints.txt`, so it must name every distribution Quill needs at the
version installed here (run `make constraints` after changing pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from packaging.requirements import Requirement

from quill_stack.services import PROJECT_ROOT


def _pins() -> dict[str, str]:
    lines = (PROJECT_ROOT / "constraints.txt").read_text().splitlines()
    pins = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {name: version for name, version in pins}


def test_constraints_match_the_installed_closure():
    made = subprocess.run(
        [sys.executable, "scripts/constraints.py"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert made == (PROJECT_ROOT / "constraints.txt").read_text(), (
        "constraints.txt differs from this environment: run `make constraints`"
    )


def test_every_declared_dependency_is_pinned_within_its_range():
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared += extra
    pins = _pins()
    for line in declared:
        req = Requirement(line)
        name = req.name.lower().replace("_", "-").replace(".", "-")
        assert name in pins, f"{req.name} is not in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside {req.specifier}"
        )
