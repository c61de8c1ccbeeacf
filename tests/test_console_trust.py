"""What breaks an operator's trust in the console (issue 29, items 1-5): answers that
stay wrong after leaders move, jobs that report nothing honestly, rates of groups that
stopped, forms that lose what was typed, pages that clip."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from cluster_client import admin, zk
from operations.models import Operation
from tests.ops_helpers import state, unique
from tests.wait_helpers import wait_until

pytest_plugins = ["tests.console_helpers"]


@pytest.fixture(scope="module")
def console_cluster(cluster_factory):
    return cluster_factory(3)


def _records(bootstrap: str, topic: str, partitions: int, per: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        for i in range(per):
            producer.produce(topic, b"v%d" % i, key=b"k%d" % i, partition=p)
    assert producer.flush(30) == 0


def test_leader_moves_then_group_reset_and_messages_work_at_once(console):
    cluster = console.cluster
    topic = unique("moved")
    admin.create_topic(topic, 3, 3, {})
    _records(cluster.bootstrap, topic, 3, 5)
    gid = unique("g")
    admin.alter_group_offsets(gid, {(topic, p): 1 for p in range(3)})
    client = console.login("operator")
    assert client.get(f"/api/groups/{gid}").status_code == 200
    assert client.get(f"/messages/?topic={topic}&partition=0&mode=end").status_code == 200
    before = state(cluster, topic, 0)
    leader = before["leader"]
    cluster.broker(leader).restart()
    wait_until(
        lambda: (
            state(cluster, topic, 0)["leader"] != leader
            or state(cluster, topic, 0)["leader_epoch"] > before["leader_epoch"]
        ),
        60,
        "partition 0's leader to move",
    )
    _group_reset_and_messages_answer(client, gid, topic)
    # Back in the ISR, the preferred replica takes partition 0 again: a new leader epoch.
    wait_until(lambda: len(state(cluster, topic, 0)["isr"]) == 3, 60, "the full ISR")
    moved = state(cluster, topic, 0)
    kafka = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept until it answers
    kafka.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    after = state(cluster, topic, 0)
    assert (after["leader"], after["leader_epoch"]) != (moved["leader"], moved["leader_epoch"])
    _group_reset_and_messages_answer(client, gid, topic)


def _group_reset_and_messages_answer(client, gid: str, topic: str) -> None:
    r = client.get(f"/api/groups/{gid}")
    assert r.status_code == 200, r.content
    assert {p["partition"] for p in r.json()["partitions"]} == {0, 1, 2}
    body = {"strategy": "earliest", "dry_run": False}
    r = client.post(f"/api/groups/{gid}/reset", json.dumps(body), content_type="application/json")
    assert r.status_code == 200, r.content
    assert admin.group_offsets(gid) == {(topic, p): 0 for p in range(3)}
    r = client.get(f"/messages/?topic={topic}&partition=0&mode=end")
    assert r.status_code == 200, r.content
    assert b"k4" in r.content


def _elect_every_partition(console) -> Operation:
    from operations import jobs, kinds  # noqa: F401 - kinds registers the runners

    op = Operation.objects.create(kind="elect-leaders", params={}, username="t")
    assert jobs.run(op.id) == "succeeded"
    op.refresh_from_db()
    return op


def test_election_reports_moves_as_a_table_and_already_preferred_honestly(console):
    cluster = console.cluster
    topic = unique("pref")
    admin.create_topic(topic, 2, 3, {})
    _elect_every_partition(console)  # what earlier tests moved goes back first
    total = sum(len(a) for a in zk.assignments(zk.topic_names()).values())
    leader = state(cluster, topic, 0)["leader"]
    cluster.broker(leader).restart()
    wait_until(lambda: len(state(cluster, topic, 0)["isr"]) == 3, 60, "the full ISR")
    moved = {
        (t, p)
        for t, a in zk.assignments(zk.topic_names()).items()
        for p, replicas in a.items()
        if state(cluster, t, p)["leader"] != replicas[0]
    }
    assert (topic, 0) in moved
    interim = state(cluster, topic, 0)["leader"]
    op = _elect_every_partition(console)
    assert op.progress["total"] == op.progress["done"] == total
    assert op.progress["percent"] == 100.0
    assert {(r["topic"], r["partition"]) for r in op.result["elected"]} == moved
    assert op.result["not_needed"] == total - len(moved)
    html = console.login("viewer").get(f"/operations/{op.id}/").content.decode()
    assert 'id="election-result"' in html
    row = f'<td class="mono">{topic}-0</td><td class="num">{interim}</td>'
    assert row + f'<td class="num">{leader}</td><td>moved</td>' in html
    assert f"{total - len(moved)} already preferred" in html
    # Every leader preferred now: all of them reported so, not "0 / ?".
    op = _elect_every_partition(console)
    assert op.result == {"elected": [], "not_needed": total, "failed": []}
    assert op.progress["total"] == op.progress["done"] == total
    html = console.login("viewer").get(f"/operations/{op.id}/").content.decode()
    assert f"{total} / {total}" in html and f"{total} already preferred" in html
    assert "100.0 %" in html


def test_a_stopped_group_shows_no_rate_and_no_catch_up(console):
    """The monitor's group sampler over a real topic: a group that committed a record a
    second, then stopped; five minutes on its rate is 0, no catch-up is promised and the
    topic's out rate is 0, not the last value seen."""
    from console.monitor.sampler import GroupSampler

    topic = unique("stop")
    admin.create_topic(topic, 1, 1, {})
    _records(console.cluster.bootstrap, topic, 1, 100)
    part, gid = (topic, 0), unique("g")
    listed = [{"group_id": gid, "state": "Empty", "simple": False}]
    described = {gid: {"state": "Empty", "members": []}}
    sampler, s = GroupSampler(), {"hw": {part: 100}}
    for t in range(0, 60, 5):
        out, _deltas, consumed = sampler.sample(
            s, 1000.0 + t, (listed, described, {gid: {part: t}})
        )
    row = out[gid]["partitions"][f"{topic}/0"]
    assert row["rate"] == pytest.approx(1.0) and consumed[topic] == pytest.approx(1.0)
    out, _deltas, consumed = sampler.sample(s, 1355.0, (listed, described, {gid: {part: 55}}))
    row = out[gid]["partitions"][f"{topic}/0"]
    assert (row["lag"], row["rate"], row["eta_s"], row["status"]) == (45, 0.0, None, "STOP")
    assert consumed[topic] == 0.0


def test_a_refused_config_edit_keeps_the_text_and_says_why_beside_it(console):
    topic = unique("cfg")
    admin.create_topic(topic, 1, 3, {})
    client = console.login("operator")
    typed = "retention.ms=3600000\nmin.insync.replicas=5"
    r = client.post(f"/topics/{topic}/configs", {"configs": typed})
    assert r.status_code == 400
    html = r.content.decode()
    assert f">{typed}</textarea>" in html
    assert "min.insync.replicas 5 is more than the replication factor 3" in html
    assert '<div class="field-error">min.insync.replicas 5' in html
    typed = "retention.ms=an hour"
    r = client.post(f"/topics/{topic}/configs", {"configs": typed})
    assert r.status_code == 400 and f">{typed}</textarea>" in r.content.decode()
    assert "retention.ms" not in {
        c["name"] for c in admin.topic_configs(topic) if c["source"] == "topic"
    }


def test_the_acl_page_says_up_front_that_no_authorizer_is_configured(console):
    html = console.login("admin").get("/security/acls/").content.decode()
    assert 'id="no-authorizer"' in html and "authorizer.class.name" in html
    assert 'id="acl-form"' not in html


def test_an_empty_partition_in_messages_asks_for_one_by_its_range(console):
    topic = unique("msg")
    admin.create_topic(topic, 3, 1, {})
    r = console.login("viewer").get(f"/messages/?topic={topic}&partition=&mode=end")
    html = r.content.decode()
    assert r.status_code == 400
    assert f"Choose the partition to read: {topic} has partitions 0 to 2." in html
    assert "whole number" not in html


def test_removals_ask_first_and_short_scram_passwords_are_refused(console):
    client = console.login("admin")
    user = unique("u")
    r = client.post(
        "/security/scram-users/action",
        {"user": user, "mechanism": "SCRAM-SHA-256", "password": "x"},
    )
    assert r.status_code == 400
    assert "at least 8 characters long (this one has 1)" in r.content.decode()
    r = client.post(
        "/security/scram-users/action",
        {"user": user, "mechanism": "SCRAM-SHA-256", "password": "long-enough"},
    )
    assert r.status_code == 302
    html = client.get("/security/scram-users/").content.decode()
    assert f'data-confirm="Delete the SCRAM-SHA-256 credential of {user}?' in html
    client.post("/quotas/set", {"user": user, "producer_byte_rate": "1048576"})
    html = client.get("/quotas/").content.decode()
    assert 'data-confirm="Remove this quota (' + user in html
    client.post("/account/tokens/action", {"name": "ci"})
    html = client.get("/account/tokens/").content.decode()
    assert 'data-confirm="Revoke the token ci?' in html


def test_compaction_requests_do_not_claim_no_figures_beside_the_cleaners():
    from django.template.loader import render_to_string

    context = {"compaction": {"rows": []}, "topic": {"name": "t"}}
    alone = render_to_string("console/_compaction_reports.html", context)
    assert "No figures yet" in alone and 'id="cleaner-status"' in alone
    cleaner = [{"partition": 0, "broker": 1, "dirty_ratio": 0.4}]
    beside = render_to_string("console/_compaction_reports.html", {**context, "cleaner": cleaner})
    assert "No figures yet" not in beside and 'id="cleaner-status"' not in beside
    assert 'id="compaction-none"' in beside
