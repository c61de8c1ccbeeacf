"""Faults across hosts (issue 27) on a three-server ZooKeeper ensemble: brokers take a
multi-host zookeeper.connect with a chroot (10.77.0.10:2181,...,10.77.0.12:2181/quill).

One run, three faults one after another, the workload running throughout:
- a ZooKeeper minority cut off from every other host (the cluster keeps working);
- the leader of faults-0 SIGSTOPped for longer than the session timeout, then resumed:
  a zombie whose session, leader epoch (and perhaps controller epoch) are stale;
- the leader of faults-0 cut off from ZooKeeper only (it loses its session while
  clients and followers still reach it).
Then the checker's properties and the cluster's convergence, as conditions.
"""

from __future__ import annotations

import pytest

from faults.run import run_once
from tests.faults_helpers import assert_safe, require_hosts

# the run is the module fixture: a few minutes of faults, longer on a loaded machine
pytestmark = pytest.mark.timeout(1200)

FAULTS = ["partition-zk-minority", "pause-leader", "partition-leader-zk"]


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory):
    require_hosts()
    return run_once(tmp_path_factory.mktemp("faults-ensemble"), FAULTS, seed=27, n_zk=3)


def test_ensemble_faults_lose_and_duplicate_nothing(ensemble_run):
    assert [w.kind for w in ensemble_run.windows] == FAULTS
    assert_safe(ensemble_run)


def test_group_commits_continue_through_faults(ensemble_run):
    assert ensemble_run.counts["group_commits"] > 0
    assert not ensemble_run.report.offsets_backwards
