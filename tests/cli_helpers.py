"""Run the operator tools as an operator would: a separate process per command."""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid
from dataclasses import dataclass


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def cli(tool: str, *args: str, stdin: str | None = None, timeout: float = 120) -> Run:
    """``python -m broker.cli.<tool> args...`` (the module behind quill-<tool>)."""
    proc = subprocess.run(
        [sys.executable, "-m", f"broker.cli.{tool}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def tool(name: str, bootstrap: str, command: str, stdin: str | None = None) -> Run:
    """``tool("topics", b, "--list")``: the command line as an operator types it."""
    return cli(name, "--bootstrap-server", bootstrap, *shlex.split(command), stdin=stdin)


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
