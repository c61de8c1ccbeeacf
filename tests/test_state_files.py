"""Files in the state dir that several processes may make at once: the console's secret
key is created by whichever of the console and its monitor starts first, and the other
must read the same bytes, never fail on the file existing nor see it half written."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

from quill_stack.state import create_private_once


class _RivalWinsPath(type(Path())):
    """A path whose first read finds nothing, and whose file a rival process creates
    right after that read: the window in which two starts race."""

    rival_bytes = b"the rival's key"
    _read = False

    def read_bytes(self):
        if not _RivalWinsPath._read:
            _RivalWinsPath._read = True
            Path(self).write_bytes(self.rival_bytes)
            raise FileNotFoundError(self)
        return super().read_bytes()


def test_the_loser_of_a_race_reads_the_winners_bytes(tmp_path):
    path = _RivalWinsPath(tmp_path / "state" / "secret_key")
    (tmp_path / "state").mkdir()
    assert create_private_once(path, b"my key") == b"the rival's key"
    assert Path(path).read_bytes() == b"the rival's key"
    assert sorted(os.listdir(tmp_path / "state")) == ["secret_key"]  # no temp file left


def test_the_first_maker_writes_a_private_file_and_later_calls_read_it(tmp_path):
    path = tmp_path / "state" / "secret_key"
    assert create_private_once(path, b"first") == b"first"
    assert create_private_once(path, b"second") == b"first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.listdir(path.parent) == ["secret_key"]


def _make(path: str, barrier, results) -> None:
    barrier.wait()
    results.put(create_private_once(Path(path), str(os.getpid()).encode()))


def test_processes_starting_together_all_get_one_key(tmp_path):
    path = tmp_path / "state" / "secret_key"
    ctx = multiprocessing.get_context("fork")
    for _ in range(5):
        path.unlink(missing_ok=True)
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_make, args=(str(path), barrier, results)) for _ in range(6)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert len(set(got)) == 1
        assert got[0] == path.read_bytes()
        assert got[0].decode() in {str(p.pid) for p in procs}
