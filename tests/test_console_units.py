"""The console's pure pieces: input rules, Burrow's lag rules, number formats, quota
paths, message rendering and the deltas a ZooKeeper change turns into."""

from __future__ import annotations

import asyncio

import pytest

from cluster_client.errors import OpError
from console import fmt
from console.changes import messages, quotas, validation
from console.monitor import burrow, deltas
from livefeed.groups import channel_group


@pytest.mark.parametrize("name", ["orders", "a.b_c-1", "x" * 249])
def test_legal_topic_names(name):
    assert validation.topic_name(name) == name


@pytest.mark.parametrize(
    "name,fragment",
    [("", "needs a name"), ("..", "'.' or '..'"), ("x" * 250, "249"), ("a b", "' '"), ("ü", "'ü'")],
)
def test_illegal_topic_names_name_the_field(name, fragment):
    with pytest.raises(OpError) as err:
        validation.topic_name(name)
    assert fragment in err.value.message
    assert err.value.errors == {"name": err.value.message}


def test_config_values_are_checked_and_normalized():
    assert validation.topic_configs(
        {"retention.ms": " 1000 ", "cleanup.policy": "compact,delete", "preallocate": "TRUE"}
    ) == {"retention.ms": "1000", "cleanup.policy": "compact,delete", "preallocate": "true"}
    with pytest.raises(OpError) as err:
        validation.topic_configs({"retention.ms": "-5", "bogus.key": "1", "segment.bytes": "x"})
    assert set(err.value.errors) == {
        "configs.retention.ms",
        "configs.bogus.key",
        "configs.segment.bytes",
    }
    assert "between -1" in err.value.errors["configs.retention.ms"]
    assert "not a topic config" in err.value.errors["configs.bogus.key"]


def test_config_text_parses_properties_lines():
    text = "# comment\nretention.ms = 5\n\nsegment.bytes=1048576\n"
    assert validation.parse_config_text(text) == {"retention.ms": "5", "segment.bytes": "1048576"}
    with pytest.raises(OpError, match="Line 1"):
        validation.parse_config_text("no equals sign")


@pytest.mark.parametrize("value", ["-1", "0", "abc"])
def test_quota_values_must_be_positive_numbers(value):
    with pytest.raises(OpError) as err:
        validation.quota_values({"producer_byte_rate": value})
    assert list(err.value.errors) == ["quotas.producer_byte_rate"]


def test_quota_entity_paths_follow_kafka():
    assert quotas.entity_path("alice", None) == "users/alice"
    assert quotas.entity_path(None, "app-1") == "clients/app-1"
    assert quotas.entity_path("CN=a b*", "c/d") == "users/CN%3Da%20b%2A/clients/c%2Fd"
    assert quotas.entity_path("<default>", "<default>") == "users/<default>/clients/<default>"
    with pytest.raises(OpError):
        quotas.entity_path("", " ")


def commits(*rows):
    return [burrow.Commit(ts, offset, lag) for ts, offset, lag in rows]


def test_burrow_rules():
    moving = commits((0, 10, 5), (10, 20, 6), (20, 30, 7))
    assert burrow.partition_status(moving, 25, 8, True) == "WARN"  # lag never decreases
    catching_up = commits((0, 10, 9), (10, 20, 6), (20, 30, 3))
    assert burrow.partition_status(catching_up, 25, 2, True) == "OK"
    assert burrow.partition_status(commits((0, 10, 0), (10, 20, 4)), 15, 4, True) == "OK"
    rewound = commits((0, 50, 1), (10, 20, 31))
    assert burrow.partition_status(rewound, 15, 31, True) == "REWIND"
    stopped = commits((0, 10, 5), (40, 20, 5))
    assert burrow.partition_status(stopped, 200, 9, False) == "STOP"
    assert burrow.partition_status(stopped, 200, 9, True) == "STALL"
    assert burrow.partition_status(stopped, 200, 0, False) == "OK"  # caught up: not an error
    assert burrow.group_status(["OK", "WARN"]) == "WARN"
    assert burrow.group_status(["OK", "STALL", "WARN"]) == "ERR"
    assert burrow.catch_up_s(100, 30.0, 10.0) == 5.0
    assert burrow.catch_up_s(100, 10.0, 30.0) is None


def test_window_records_changes_only_and_rates():
    w = burrow.PartitionWindow(size=3)
    for ts, offset in [(0, 0), (1, 0), (2, 100), (3, 100), (4, 300), (5, 400)]:
        w.observe(ts, offset, 0)
    assert [c.offset for c in w.commits] == [100, 300, 400]
    assert w.consume_rate(5) == pytest.approx(100.0)  # 300 records over the 3 s seen
    assert w.consume_rate(122, window_s=60) == 0.0  # none committed in the last minute


def test_a_stopped_consumer_rate_falls_to_zero_and_no_catch_up_is_promised():
    w = burrow.PartitionWindow()
    for ts in range(0, 120, 10):  # one record a second, committed every 10 s
        w.observe(ts, ts, 5000 - ts)
    assert w.consume_rate(110) == pytest.approx(1.0)
    assert w.consume_rate(140) == pytest.approx(0.5)  # the last minute: 30 of 60 s consuming
    stopped = w.consume_rate(110 + 300)  # five minutes after the last commit
    assert stopped == 0.0
    assert burrow.catch_up_s(3601, stopped, 0.0) is None
    assert burrow.PartitionWindow().consume_rate(0) is None


def test_formats():
    assert fmt.num(1234567) == "1,234,567"
    assert fmt.size(1536) == "1.5 KiB"
    assert fmt.duration_ms(850) == "850 ms"
    assert fmt.duration_ms(190_000) == "3 min 10 s"
    assert fmt.rate(12.345) == "12/s"
    assert fmt.timestamp(0) == "1970-01-01 00:00:00.000Z"
    assert fmt.num(None) == fmt.size(None) == "—"


def test_rendering_records():
    assert messages.render(b'{"a": 1}', "json") == '{\n  "a": 1\n}'
    assert messages.render(b"not json", "json") == "not json"
    assert messages.render(b"AB\x00", "hex") == "00000000  41 42 00" + " " * 41 + "AB."
    assert messages.render(None, "text") is None
    assert messages.parse_when("2026-01-01T00:00:00Z") == 1767225600000
    with pytest.raises(OpError):
        messages.parse_when("yesterday")


def test_channel_groups_are_valid_names():
    assert channel_group("cluster") == "quill.cluster"
    long = channel_group("topic:" + "x" * 249)
    assert len(long) < 100 and long.startswith("quill.topic.")
    assert channel_group("group:a b/c") != channel_group("group:a b/d")
    assert channel_group("bogus") is None and channel_group("topic:") is None


def test_isr_shrink_becomes_an_event_and_cells():
    change = {
        "kind": "partition_state",
        "ts": 1,
        "topic": "orders",
        "partition": 2,
        "old": {"leader": 1, "leader_epoch": 3, "isr": [1, 2, 3]},
        "new": {"leader": 1, "leader_epoch": 3, "isr": [1, 2]},
        "replicas": [1, 2, 3],
    }
    events, out = deltas.for_change(change, live={1, 2})
    assert [e["kind"] for e in events] == ["isr_shrink"]
    assert "out: 3" in events[0]["text"]
    cells = out["topic:orders"]["set"]
    assert cells["p:orders:2:isr"]["t"] == "1, 2"
    assert ["3", "rep out"] in cells["p:orders:2:replicas"]["s"]
    assert cells["p:orders:2:state"]["s"] == [["under-replicated", "pill warn"]]
    assert out["cluster"]["events"] == events


def test_leader_moves_and_initial_state_is_not_news():
    change = {
        "kind": "partition_state",
        "ts": 1,
        "topic": "t",
        "partition": 0,
        "old": {"leader": 1, "leader_epoch": 0, "isr": [1, 2]},
        "new": {"leader": 2, "leader_epoch": 1, "isr": [2]},
        "replicas": [1, 2],
    }
    events, _ = deltas.for_change(change, live={2})
    assert [e["kind"] for e in events] == ["leader_change", "isr_shrink"]
    first = {**change, "old": None, "initial": True}
    assert deltas.for_change(first, live={2})[0] == []


def test_slow_offsets_are_spread_over_rounds_and_carried_between_them():
    """Log start and sizes of 10,000 partitions are asked 2,000 at a time: every
    partition once per cycle of rounds, and between its turns the last value stays."""
    from console.monitor.sampler import SLOW_PER_ROUND, OffsetSampler

    replicas = {(f"t{t}", p): [1, 2] for t in range(10) for p in range(1000)}
    sampler = OffsetSampler()
    assert sampler._slow_slice(replicas) is None  # the first round asks for everything
    sampler.prev = {
        "start": {part: 7 for part in replicas},
        "size": {(b, part): 100 for part in replicas for b in (1, 2)},
    }
    slices = []
    for _ in range(len(replicas) // SLOW_PER_ROUND):
        slices.append(sampler._slow_slice(replicas))
        sampler.rounds += 1
    assert set().union(*slices) == set(replicas)
    assert sum(len(s) for s in slices) == len(replicas)  # disjoint
    assert max(len(s) for s in slices) < 1.2 * SLOW_PER_ROUND
    assert sampler._slow_slice(replicas) == slices[0]  # the cycle repeats
    slow = slices[0]
    asked = next(iter(slow))
    s = {"start": {asked: 9}, "size": {(1, asked): 500}}
    sampler._carry_slow(s, replicas, slow)
    assert s["start"][asked] == 9 and s["size"][(1, asked)] == 500
    assert (2, asked) not in s["size"]  # asked this round and not answered: not invented
    others = set(replicas) - slow
    assert all(s["start"][p] == 7 and s["size"][(2, p)] == 100 for p in others)
    assert len(s["start"]) == len(others) + 1
    assert sampler._slow_slice({("small", 0): [1]}) is None  # small clusters: all, always


@pytest.mark.parametrize("raw", ["0", "-5", "abc", "nan", "inf", "1e999"])
def test_timing_settings_refuse_what_is_not_a_positive_number_of_seconds(monkeypatch, raw):
    from django.core.exceptions import ImproperlyConfigured

    from console.env import env_seconds

    monkeypatch.setenv("QUILL_ALERT_EVALUATE_S", raw)
    with pytest.raises(ImproperlyConfigured, match="QUILL_ALERT_EVALUATE_S must be a number"):
        env_seconds("QUILL_ALERT_EVALUATE_S", 10.0)


def test_timing_settings_default_and_read(monkeypatch):
    from console.env import env_seconds

    monkeypatch.delenv("QUILL_ORPHAN_SCAN_S", raising=False)
    assert env_seconds("QUILL_ORPHAN_SCAN_S", 15.0) == 15.0
    monkeypatch.setenv("QUILL_ORPHAN_SCAN_S", " 2.5 ")
    assert env_seconds("QUILL_ORPHAN_SCAN_S", 15.0) == 2.5


def test_the_console_refuses_to_start_with_a_zero_lag_span():
    import os
    import subprocess
    import sys

    env = {**os.environ, "QUILL_LAG_MIN_SPAN_S": "0", "DJANGO_SETTINGS_MODULE": "console.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "QUILL_LAG_MIN_SPAN_S must be a number of seconds above 0, got '0'" in done.stderr


def _monitor_whose_send_swallows_a_cancel():
    """A Monitor (no ZooKeeper, no Redis) whose ``send`` does what a library racing a
    timeout against a cancel does: the CancelledError comes out as TimeoutError."""
    from console.monitor.run import Monitor

    m = Monitor.__new__(Monitor)
    m.interval, m.samples, m.last_sample_s = 0.01, 0, 0.0
    m.sends, m.swallow = 0, True
    m.sample_once = lambda offsets, groups: {}

    async def send(out):
        m.sends += 1
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if not m.swallow:
                raise
            raise TimeoutError("the library's own timeout fired as the cancel landed") from None

    m.send = send
    return m


async def _cancel_once_and_wait(m, coro) -> asyncio.Task:
    task = asyncio.ensure_future(coro)
    for _ in range(200):  # the loop is inside its first send
        if m.sends:
            break
        await asyncio.sleep(0.01)
    assert m.sends == 1
    task.cancel()  # once: the fix must not rely on a second cancel
    done, _ = await asyncio.wait([task], timeout=10)
    if not done:  # a failed test leaves no loop running behind it
        m.swallow = False
        task.cancel()
        await asyncio.wait([task], timeout=10)
    assert done, "one cancel did not stop the loop: the swallowed cancel kept it going"
    return task


async def test_a_cancel_a_library_turns_into_an_error_stops_the_sampler():
    m = _monitor_whose_send_swallows_a_cancel()
    task = await _cancel_once_and_wait(m, m._sampler(None))
    assert task.cancelled()
    assert m.sends == 1  # no sample after the cancel


async def test_a_cancel_a_library_turns_into_an_error_stops_the_publisher():
    m = _monitor_whose_send_swallows_a_cancel()
    m.queue = asyncio.Queue()
    m.queue.put_nowait({"change": 1})
    m.queue.put_nowait({"change": 2})
    calls = []

    async def publish_changes(batch):
        calls.append(batch)
        await m.send({})

    m.publish_changes = publish_changes
    task = await _cancel_once_and_wait(m, m._publisher())
    assert task.cancelled()
    assert calls == [[{"change": 1}, {"change": 2}]]
