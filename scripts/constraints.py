"""Print constraints.txt: every distribution Quill needs (its dependencies and those of
every extra, followed through their own requirements), pinned to the version installed
in this environment. `make constraints` writes it after a suite run passed with them;
scripts/install.sh installs with `pip install -c constraints.txt`."""

from __future__ import annotations

import re
import sys
from importlib import metadata

from packaging.requirements import Requirement

HEADER = """\
# The versions the suite last passed with: scripts/install.sh installs with -c this file.
# Made by `make constraints` (scripts/constraints.py) from the installed .venv; edit
# pyproject.toml for ranges, then run `make constraints` after `make test` passed.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str) -> dict[str, str]:
    """canonical name -> installed version, for `root`'s requirements (all extras)."""
    found: dict[str, str] = {}
    todo = [(root, None)]  # (distribution, extras wanted from it or None for all)
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        name, extras = todo.pop()
        if (canonical(name), frozenset(extras or ())) in seen and extras is not None:
            continue
        seen.add((canonical(name), frozenset(extras or ())))
        dist = metadata.distribution(name)
        extras = set(dist.metadata.get_all("Provides-Extra") or []) if extras is None else extras
        for line in dist.requires or []:
            req = Requirement(line)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in (extras or {""})
            )
            key = canonical(req.name)
            if not wanted or key == canonical(root):
                continue
            try:
                version = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                continue  # a marker for another platform or Python
            if key not in found:
                found[key] = version
                todo.append((req.name, set(req.extras)))
            elif req.extras:
                todo.append((req.name, set(req.extras)))
    return found


def main() -> int:
    pins = closure("quill")
    sys.stdout.write(HEADER + "".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
