"""Shared by tests/test_faults_*.py: skip cleanly where network namespaces cannot be
made, and the assertions every fault scenario ends with."""

from __future__ import annotations

import os

import pytest

from faults import netns


def require_hosts() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    missing = netns.missing_tools()
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: scripts/install.sh installs them")


def assert_safe(result) -> None:
    """Jepsen's properties held, the workload did something, the cluster converged."""
    report = result.report
    assert report.ok, report.summary()
    assert result.counts["acked"] > 0, result.counts
    assert result.counts["txn_committed"] > 0, result.counts
    assert result.counts["txn_aborted"] > 0, result.counts
