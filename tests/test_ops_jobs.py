"""Operations end to end: the console's API (daphne), a real Celery worker and three
brokers. A rebalance under an idempotent acks=all producer loses and duplicates nothing
and leaves no throttle; a worker killed -9 mid-move finishes the job after it starts
again; a cancel puts the moving partitions back; a preferred election reports what
moved; compact now keeps the last value of each key; wrong input is refused with
nothing started; chromium watches a rebalance's progress bar reach 100 % live; and
beat's orphan scan takes up an operation whose message was lost."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_helpers import BackgroundProducer
from tests.ops_helpers import alter_configs

pytest.register_assert_rewrite("tests.ops_stack_helpers")
from tests.ops_stack_helpers import read_all, unique  # noqa: E402
from tests.wait_helpers import wait_until  # noqa: E402

pytest_plugins = ["tests.ops_stack_helpers"]  # the shared `ops_stack` fixture

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
REPLICAS_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
THROTTLE_KEYS = {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    *REPLICAS_KEYS,
}


def create(stack, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": stack.cluster.bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)]
    )[topic].result(30)
    wait_until(lambda: len(stack.assignment(topic)) == len(assignment), 30, "the topic")


def fill(stack, topic: str, partition: int, n: int, size: int = 1000) -> None:
    producer = Producer({"bootstrap.servers": stack.cluster.bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, b"%09d" % i + b"x" * (size - 9), partition=partition)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def no_throttles(stack, topic: str) -> dict:
    left = {f"brokers/{b}": stack.zk_config(f"brokers/{b}") for b in (1, 2, 3)}
    left[f"topics/{topic}"] = stack.zk_config(f"topics/{topic}")
    return {e: sorted(set(c) & THROTTLE_KEYS) for e, c in left.items() if set(c) & THROTTLE_KEYS}


def test_rebalance_under_an_idempotent_producer(ops_stack):
    stack = ops_stack
    topic = unique("rebal")
    create(stack, topic, [[1, 2], [2, 1]] * 3)
    producer = BackgroundProducer(stack.cluster.bootstrap, topic, partitions=6)
    producer.start()
    try:
        wait_until(lambda: len(producer.all_acked()) > 200, 60, "records acknowledged")
        body = {"kind": "rebalance", "topics": [topic], "dry_run": True}
        status, dry = stack.call("POST", "/operations", body)
        assert status == 200, dry
        moves = dry["proposal"]["moves"]
        assert moves and all(3 in m["replicas"] for m in moves if m["adding"])
        assert any(3 in m["adding"] for m in moves)
        by_id = {row["id"]: row for row in dry["proposal"]["brokers"]}
        assert by_id[3]["before"]["replicas"] == 0 and by_id[3]["after"]["replicas"] == 4

        body.update(dry_run=False, throttle=10_000_000)
        status, started = stack.call("POST", "/operations", body)
        assert status == 202, started
        op = stack.wait_state(started["id"])
        assert op["progress"]["done"] == op["progress"]["total"] == len(moves)
        assert op["progress"]["percent"] == 100.0
        assert any("moving" in s["message"] for s in op["steps"])
        wait_until(lambda: len(producer.all_acked()) > len(moves) * 50 + 400, 60, "more acks")
    finally:
        producer.stop(120)
    assert not producer.failures
    placed = stack.assignment(topic)
    held = {b for replicas in placed.values() for b in replicas}
    assert held == {1, 2, 3}
    assert sorted(len(r) for r in placed.values()) == [2] * 6
    stored = read_all(stack.cluster.bootstrap, topic, 6)
    for p in range(6):
        assert len(stored[p]) == len(set(stored[p])), f"duplicates in partition {p}"
        assert not set(producer.acked[p]) - set(stored[p]), f"lost records in partition {p}"
    assert no_throttles(stack, topic) == {}


def _slow_move(stack, label: str):
    """A one-partition topic on broker 1 with 4 MB, moving to [2, 3] at 300 kB/s."""
    topic = unique(label)
    create(stack, topic, [[1]])
    fill(stack, topic, 0, 4000)
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 3]}]}
    status, started = stack.call(
        "POST", "/operations", {"kind": "reassign", "plan": plan, "throttle": 300_000}
    )
    assert status == 202, started
    op_id = started["id"]

    def moving():
        op = stack.operation(op_id)
        return op["progress"].get("moving") == 1 and op["progress"].get("bytes_caught_up", 0) > 0

    wait_until(moving, 90, "the move to be under way")
    return topic, op_id


def _hurry(stack, topic: str) -> None:
    """Once the event under test has happened mid-move, the topic's replicas are no
    longer throttled (its `*.throttled.replicas` deleted, as an operator may): the rest
    of the 4 MB need not crawl at 300 kB/s. The brokers' rates stay for the job to
    remove at its end. (A higher rate instead would fill the brokers' 11 s quota
    windows, and the next test's move would wait for them to drain.)"""
    alter_configs(stack.cluster.bootstrap, "topic", topic, dict.fromkeys(REPLICAS_KEYS))


def _says(stack, op_id: int, words: str) -> bool:
    return any(words in s["message"] for s in stack.operation(op_id)["steps"])


def test_a_killed_worker_finishes_the_move_after_it_starts_again(ops_stack):
    stack = ops_stack
    topic, op_id = _slow_move(stack, "kill")
    assert no_throttles(stack, topic) != {}  # throttled while it moves
    old_pid = stack.worker.pid
    stack.worker.kill()
    stack.start_worker()
    assert stack.worker.pid != old_pid
    wait_until(lambda: _says(stack, op_id, "resumed on"), 120, "the new worker to resume")
    _hurry(stack, topic)
    op = stack.wait_state(op_id, timeout=240)
    assert any("resumed on" in s["message"] for s in op["steps"])
    assert stack.assignment(topic) == {0: [2, 3]}
    assert no_throttles(stack, topic) == {}
    assert len(read_all(stack.cluster.bootstrap, topic, 1)[0]) == 4000


def test_cancel_puts_the_moving_partition_back(ops_stack):
    stack = ops_stack
    topic, op_id = _slow_move(stack, "cancel")
    status, body = stack.call("POST", f"/operations/{op_id}/cancel")
    assert status == 200, body
    op = stack.wait_state(op_id, states=("cancelled",), timeout=120)
    assert op["result"]["reverted"] == [f"{topic}-0"]
    assert stack.assignment(topic) == {0: [1]}
    assert no_throttles(stack, topic) == {}
    status, again = stack.call("POST", f"/operations/{op_id}/cancel")
    assert status == 409 and "has ended" in again["detail"]


def test_preferred_leader_election_reports_what_moved(ops_stack):
    stack = ops_stack
    topic = unique("elect")
    create(stack, topic, [[1, 2]])
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 1]}]}
    status, started = stack.call("POST", "/operations", {"kind": "reassign", "plan": plan})
    assert status == 202, started
    stack.wait_state(started["id"])
    body = {"kind": "elect-leaders", "partitions": [{"topic": topic, "partition": 0}]}
    status, started = stack.call("POST", "/operations", body)
    assert status == 202, started
    op = stack.wait_state(started["id"])
    assert op["result"]["elected"] == [{"topic": topic, "partition": 0, "from": 1, "to": 2}]


@pytest.mark.parametrize(
    ("role", "body", "status", "field", "words"),
    [
        (
            "operator",
            {"kind": "rebalance", "goal": "remove-broker", "brokers": [9]},
            400,
            "brokers",
            "Unknown or offline broker(s) [9]",
        ),
        (
            "operator",
            {
                "kind": "rebalance",
                "goal": "replication-factor",
                "topics": ["$topic"],
                "replication_factor": 4,
            },
            400,
            "replication_factor",
            "between 1 and 3",
        ),
        (
            "operator",
            {
                "kind": "reassign",
                "plan": {
                    "version": 1,
                    "partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}],
                },
            },
            400,
            "plan",
            "Unknown topic",
        ),
        (
            "operator",
            {"kind": "reassign", "plan": {"partitions": "x"}},
            400,
            "plan",
            "reassignment JSON",
        ),
        ("viewer", {"kind": "elect-leaders"}, 403, None, "operator role"),
        ("operator", {"kind": "rolling-restart"}, 403, None, "admin role"),
    ],
)
def test_wrong_input_is_refused_and_nothing_starts(ops_stack, role, body, status, field, words):
    stack = ops_stack
    if body.get("topics") == ["$topic"]:
        topic = unique("refuse")
        create(stack, topic, [[1]])
        body = {**body, "topics": [topic]}
    before = stack.call("GET", "/operations")[1]
    got, answer = stack.call("POST", "/operations", body, role=role)
    assert got == status, answer
    assert words in answer["detail"]
    if field:
        assert field in answer["errors"]
    assert stack.call("GET", "/operations")[1] == before


def test_a_second_job_on_the_same_partitions_is_refused(ops_stack):
    stack = ops_stack
    topic, op_id = _slow_move(stack, "clash")
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3]}]}
    status, answer = stack.call("POST", "/operations", {"kind": "reassign", "plan": plan})
    assert status == 409 and f"Operation {op_id}" in answer["detail"]
    stack.call("POST", f"/operations/{op_id}/cancel")
    stack.wait_state(op_id, states=("cancelled",), timeout=120)


def test_compact_now_keeps_the_last_value_of_each_key(ops_stack):
    stack = ops_stack
    topic = unique("compact")
    admin = AdminClient({"bootstrap.servers": stack.cluster.bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]], config=config)
    admin.create_topics([new])[topic].result(30)
    producer = Producer({"bootstrap.servers": stack.cluster.bootstrap, "acks": "all"})
    for version in range(100):
        for key in range(100):
            producer.produce(topic, key=b"k%03d" % key, value=b"v%03d-%03d" % (key, version))
        producer.poll(0)
    assert producer.flush(60) == 0

    status, answer = stack.call("POST", "/operations", {"kind": "compact", "topic": "nope"})
    assert status == 400 and answer["errors"] == {"topic": "Topic 'nope' does not exist."}
    status, started = stack.call("POST", "/operations", {"kind": "compact", "topic": topic})
    assert status == 202, started
    op = stack.wait_state(started["id"], timeout=240)
    replicas = op["result"]["replicas"]
    assert sorted(r["broker"] for r in replicas) == [1, 2]
    for r in replicas:
        assert r["error"] is None and r["bytes_after"] < r["bytes_before"]
        assert r["records_removed"] > 0
    values = read_all(stack.cluster.bootstrap, topic, 1)[0]
    last = {}
    for v in values:
        last[v[:4]] = v
    assert last == {b"v%03d" % k: b"v%03d-099" % k for k in range(100)}
    assert len(values) < 10000

    body = {"kind": "compact", "topic": topic, "clean": False}  # the cleaner's standing figures
    status, started = stack.call("POST", "/operations", body)
    assert status == 202, started
    standing = stack.wait_state(started["id"], timeout=120)["result"]
    assert standing["clean"] is False
    assert sorted(r["broker"] for r in standing["replicas"]) == [1, 2]
    for r in standing["replicas"]:
        assert r["uncleanable"] is False and r["last_clean_ms"] and r["bytes"] > 0


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


@pytest.mark.browser
def test_browser_watches_a_rebalance_reach_100_percent_without_reload(ops_stack):
    from playwright.sync_api import sync_playwright

    from tests.ops_stack_helpers import PASSWORD

    stack = ops_stack
    topic = unique("browse")
    create(stack, topic, [[1, 2], [2, 1], [1, 2]])
    for p in range(3):
        fill(stack, topic, p, 1500)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(30_000)
        page.goto(f"{stack.base}/accounts/login/")
        page.fill("input[name=username]", stack.users["operator"])
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.goto(f"{stack.base}/topics/{topic}/")
        page.fill("#op-buttons input[name=throttle]", "400000")
        page.click("#propose-rebalance")
        page.wait_for_selector("#proposal-moves tbody tr")
        assert page.locator("#proposal-moves tbody tr").count() >= 1
        assert "→" in page.locator("#proposal-brokers").text_content()
        page.click("#execute")
        page.wait_for_url("**/operations/*/")
        op_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
        page.wait_for_selector("#livedot[data-state=live]")
        page.evaluate("window.__noReload = 'still here'")
        seen = set()

        def percent() -> str:
            text = page.locator(f'[data-k="op:{op_id}:pct"]').first.text_content().strip()
            seen.add(text)
            return text

        wait_until(lambda: percent() == "100.0 %", 240, "the progress bar at 100 %", 0.1)
        state = page.locator(f'[data-k="op:{op_id}:state"]').first
        wait_until(lambda: state.text_content().strip() == "succeeded", 60, "succeeded")
        assert page.evaluate("window.__noReload") == "still here"
        width = page.locator(f'[data-k="op:{op_id}:bar"] .fill').get_attribute("style")
        assert "100" in width
        assert "moving" in page.locator(f'[data-k="op:{op_id}:steps"]').text_content()
        browser.close()
    assert stack.operation(op_id)["state"] == "succeeded"
    assert {b for r in stack.assignment(topic).values() for b in r} == {1, 2, 3}


def test_pause_holds_the_job_and_resume_finishes_it(ops_stack):
    stack = ops_stack
    topic, op_id = _slow_move(stack, "pause")
    status, body = stack.call("POST", f"/operations/{op_id}/pause")
    assert status == 200 and body["pause_requested"] is True
    stack.wait_state(op_id, states=("paused",), timeout=60)
    _hurry(stack, topic)
    status, body = stack.call("POST", f"/operations/{op_id}/resume")
    assert status == 200 and body["pause_requested"] is False
    op = stack.wait_state(op_id, timeout=240)
    messages = [s["message"] for s in op["steps"]]
    assert "paused" in messages and "resumed" in messages
    assert stack.assignment(topic) == {0: [2, 3]}
    assert no_throttles(stack, topic) == {}


ORPHAN_SCRIPT = """
from datetime import timedelta
from django.utils import timezone
from operations.models import Operation
op = Operation.objects.create(kind="lost-message", username="tests", source="api")
Operation.objects.filter(id=op.id).update(created=timezone.now() - timedelta(hours=1))
print(op.id)
"""


def test_beat_orphan_scan_takes_up_an_operation_whose_message_was_lost(ops_stack):
    """A pending operation never sent to a worker (its message lost) is taken up by the
    scan beat sends ("orphan-scan"): the worker runs it, and with no runner for its kind
    it fails saying so."""
    stack = ops_stack
    op_id = int(stack.shell(ORPHAN_SCRIPT).strip().splitlines()[-1])
    op = stack.wait_state(op_id, states=("failed",), timeout=120)
    assert op["error"] == "No worker here runs 'lost-message' operations."
    log = stack.worker.spec.log_path.read_text(errors="replace")
    assert "Sending due task orphan-scan (quill.operation.scan_orphans)" in log
    assert f"taking up operation {op_id}" in log


def test_a_dead_destination_broker_stalls_its_move_and_the_job_says_which(ops_stack):
    """Last in the module: it kills broker 3 (and starts it again)."""
    stack = ops_stack
    topic, op_id = _slow_move(stack, "stall")
    broker = stack.cluster.broker(3)
    broker.kill()
    try:
        said = f"stalled: {topic}-0 waits for broker 3, which is down"

        def stalled():
            op = stack.operation(op_id)
            return said in [s["message"] for s in op["steps"]] and op["progress"]["stalled"]

        try:
            wait_until(stalled, 90, "the job to report the stalled move", 1.0)
        except AssertionError:
            op = stack.operation(op_id)
            raise AssertionError((op["state"], op["error"], op["steps"][-4:])) from None
        assert stack.operation(op_id)["state"] == "running"
    finally:
        broker.start()
    _hurry(stack, topic)
    op = stack.wait_state(op_id, timeout=300)
    assert stack.assignment(topic) == {0: [2, 3]}
    assert no_throttles(stack, topic) == {}
    assert op["progress"]["percent"] == 100.0
