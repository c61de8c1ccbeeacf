"""Client quota units: Kafka's Rate, the order of precedence, the throttle time."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from broker.quota.manager import (
    ANONYMOUS,
    DEFAULT,
    FETCH,
    PRODUCE,
    REQUEST,
    ClientQuotaManager,
    entity_path,
    parse_entity_path,
    precedence,
)
from broker.quota.rate import Rate
from broker.server.quotas import TimedCoroutine


def test_rate_counts_at_least_samples_minus_one_windows():
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000, now_ms=0)
    # one burst on a fresh rate is spread over 10 windows, not over 0 ms
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    rate.record(1000, now_ms=500)
    assert rate.measure(500) == pytest.approx(2000 / 10.5)


def test_rate_spans_real_time_once_windows_are_full_and_forgets_old_samples():
    rate = Rate(samples=3, window_ms=1000)
    for t in range(0, 5000, 100):
        rate.record(10, now_ms=t)
    # samples opened at 2000, 3000, 4000 (10 records each); span 4900 - 2000
    assert rate.window_size_ms(4900) == 2900
    assert rate.measure(4900) == pytest.approx(300 / 2.9)
    # after samples * window of silence every sample is stale
    assert rate.measure(9000) == 0.0


def test_precedence_is_kafkas_and_tags_share_rates_as_kafka_does():
    entities = [e for e, _tags in precedence("alice", "app")]
    assert [entity_path(e) for e in entities] == [
        "users/alice/clients/app",
        "users/alice/clients/<default>",
        "users/alice",
        "users/<default>/clients/app",
        "users/<default>/clients/<default>",
        "users/<default>",
        "clients/app",
        "clients/<default>",
    ]
    tags = dict(precedence("alice", "app"))
    assert tags[("alice", None)] == ("alice", "")  # one rate for all of alice's clients
    assert tags[(None, DEFAULT)] == ("", "app")  # the default: a rate per client-id


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        (["clients/<default>"], "clients/<default>"),
        (["clients/<default>", "clients/app"], "clients/app"),
        (["clients/app", "users/<default>"], "users/<default>"),
        (
            ["users/<default>", "users/<default>/clients/<default>"],
            "users/<default>/clients/<default>",
        ),
        (["users/<default>/clients/app", "users/alice"], "users/alice"),
        (["users/alice", "users/alice/clients/<default>"], "users/alice/clients/<default>"),
        (["users/alice/clients/<default>", "users/alice/clients/app"], "users/alice/clients/app"),
        (["users/bob", "clients/other"], None),
    ],
)
def test_most_specific_entity_wins(configured, expected):
    quotas = ClientQuotaManager()
    for i, path in enumerate(configured):
        quotas.update(parse_entity_path(path), {PRODUCE: str(1000 * (i + 1))})
    found = quotas.quota(PRODUCE, "alice", "app")
    if expected is None:
        assert found is None
    else:
        bound = 1000 * (configured.index(expected) + 1)
        assert found[0] == bound


def test_precedence_is_per_quota_key():
    quotas = ClientQuotaManager()
    quotas.update(("alice", None), {PRODUCE: "500"})
    quotas.update((None, "app"), {FETCH: "700", PRODUCE: "900"})
    assert quotas.quota(PRODUCE, "alice", "app")[0] == 500
    assert quotas.quota(FETCH, "alice", "app")[0] == 700


def test_anonymous_clients_get_user_default_quotas_as_in_kafka():
    quotas = ClientQuotaManager()
    quotas.update((DEFAULT, None), {PRODUCE: "100"})
    assert quotas.quota(PRODUCE, ANONYMOUS, "anything") == (100.0, (ANONYMOUS, ""))


def test_entity_paths_round_trip_sanitized_names():
    for entity in [(None, "a b/c*"), ("CN=x,O=y", None), ("u@x", "c:1"), (DEFAULT, DEFAULT)]:
        assert parse_entity_path(entity_path(entity)) == entity
    assert entity_path(("u/1", "c*")) == "users/u%2F1/clients/c%2A"
    assert parse_entity_path("topics/x") is None
    assert parse_entity_path("users/a/clients") is None


def test_throttle_time_is_kafkas_formula_capped_at_the_window():
    quotas = ClientQuotaManager(samples=11, window_s=1)
    quotas.update((None, "slow"), {PRODUCE: "1000"})
    assert quotas.record(PRODUCE, ANONYMOUS, "slow", 5_000, now_ms=0) == 0  # 500/s
    # 15,000 bytes over a 10 s window: 1500/s, half over: (1500-1000)/1000 * 10 s
    assert quotas.record(PRODUCE, ANONYMOUS, "slow", 10_000, now_ms=0) == 5_000
    assert quotas.record(PRODUCE, ANONYMOUS, "slow", 10**9, now_ms=1) == 11_000
    assert quotas.record(PRODUCE, ANONYMOUS, "fast", 10**9, now_ms=1) == 0  # no quota
    stats = {(s["quota_key"], s["client_id"]): s for s in quotas.snapshot()}
    assert stats[(PRODUCE, "slow")]["throttled_requests"] == 2
    assert stats[(PRODUCE, "slow")]["throttle_time_ms"] == 16_000


def test_default_client_quota_is_a_rate_per_client_id():
    quotas = ClientQuotaManager()
    quotas.update((None, DEFAULT), {FETCH: "1000"})
    assert quotas.record(FETCH, ANONYMOUS, "a", 9_000, now_ms=0) == 0
    assert quotas.record(FETCH, ANONYMOUS, "b", 9_000, now_ms=0) == 0  # not a's rate
    assert quotas.record(FETCH, ANONYMOUS, "a", 9_000, now_ms=0) > 0


def test_unrecord_takes_a_throttled_fetch_back():
    quotas = ClientQuotaManager()
    quotas.update((None, "c"), {FETCH: "1000"})
    assert quotas.record(FETCH, ANONYMOUS, "c", 20_000, now_ms=0) > 0
    quotas.unrecord(FETCH, ANONYMOUS, "c", 20_000, now_ms=0)
    assert quotas.record(FETCH, ANONYMOUS, "c", 5_000, now_ms=1) == 0


def test_removed_quota_stops_throttling():
    quotas = ClientQuotaManager()
    quotas.update((None, "c"), {PRODUCE: "1000"})
    assert quotas.record(PRODUCE, ANONYMOUS, "c", 50_000, now_ms=0) > 0
    quotas.update((None, "c"), {})
    assert quotas.record(PRODUCE, ANONYMOUS, "c", 50_000, now_ms=1) == 0
    assert quotas.overrides == {}


@pytest.mark.parametrize("bad", ["-5", "abc", "", "nan", "inf", "0"])
def test_bad_values_are_logged_and_ignored(bad, caplog):
    quotas = ClientQuotaManager()
    with caplog.at_level(logging.ERROR):
        quotas.update((None, "c"), {PRODUCE: bad, FETCH: "2000"})
    assert quotas.quota(PRODUCE, ANONYMOUS, "c") is None
    assert quotas.quota(FETCH, ANONYMOUS, "c")[0] == 2000
    assert "ignoring quota producer_byte_rate" in caplog.text


def test_idle_clients_are_forgotten_after_an_hour():
    quotas = ClientQuotaManager()
    quotas.update((None, DEFAULT), {PRODUCE: "1000"})
    quotas.record(PRODUCE, ANONYMOUS, "short-lived", 100, now_ms=0)
    quotas.record(PRODUCE, ANONYMOUS, "steady", 100, now_ms=0)
    quotas.record(PRODUCE, ANONYMOUS, "steady", 100, now_ms=3_000_000)
    assert {s["client_id"] for s in quotas.snapshot()} == {"short-lived", "steady"}
    quotas.record(PRODUCE, ANONYMOUS, "steady", 100, now_ms=3_700_000)
    assert {s["client_id"] for s in quotas.snapshot()} == {"steady"}


def test_request_quota_throttle_is_bounded_at_one_window():
    quotas = ClientQuotaManager(samples=11, window_s=1)
    quotas.update((None, "busy"), {REQUEST: "1"})  # 1 % of one thread
    assert quotas.enabled(REQUEST) and not quotas.enabled(FETCH)
    assert quotas.record(REQUEST, ANONYMOUS, "busy", 50.0, now_ms=0) == 1000  # capped


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_timed_coroutine_counts_its_own_steps_not_its_waits():
    async def handler():
        _spin(0.02)
        await asyncio.sleep(0.2)
        _spin(0.02)
        return "done"

    async def main():
        timed = TimedCoroutine(handler())
        return await timed, timed.nanos

    result, nanos = asyncio.run(main())
    assert result == "done"
    assert 0.04e9 <= nanos < 0.15e9


def test_timed_coroutine_passes_errors_and_cancellation_through():
    async def failing():
        await asyncio.sleep(0)
        raise ValueError("bad")

    async def waiting(done: list):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            done.append("cancelled")
            raise

    async def timed(coro):
        return await TimedCoroutine(coro)

    async def main():
        with pytest.raises(ValueError, match="bad"):
            await timed(failing())
        done: list = []
        task = asyncio.ensure_future(timed(waiting(done)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return done

    assert asyncio.run(main()) == ["cancelled"]
