"""Print the requirements pyproject.toml lists: the core ones, or an extra's.

    python containers/requirements.py             # [project] dependencies
    python containers/requirements.py pipeline    # [project.optional-dependencies] pipeline

The Dockerfile installs them before copying the code, so that layer stays cached until
pyproject.toml changes.
"""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
extras = sys.argv[1:]
wanted = (
    [project["optional-dependencies"][e] for e in extras] if extras else [project["dependencies"]]
)
print("\n".join(r for group in wanted for r in group))
