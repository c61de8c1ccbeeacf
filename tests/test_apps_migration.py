"""Operation, AlertRule and AlertEvent moved from the console app to the operations and
alerts apps without losing a row: a database made by the old layout (migrated up to
console 0004, when the three models were the console's), with rows in it, migrates to
the new layout with no table made, dropped or rebuilt, and the new models read the rows.

Each step is a real `manage.py` process on its own SQLite file (the settings' database),
as an operator's upgrade runs it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("console_operation", "console_alertrule", "console_alertevent")

READ_BACK = """
import json
from django.contrib.contenttypes.models import ContentType
from alerts.models import AlertEvent, AlertRule
from operations.models import Operation
op = Operation.objects.get()
rule = AlertRule.objects.get()
event = AlertEvent.objects.get()
print(json.dumps({
    "op": [op.id, op.kind, op.state, op.params, op.progress, op.username],
    "rule": [rule.id, rule.name, rule.group, rule.statuses, rule.max_lag_ms, rule.emails],
    "event": [event.id, event.rule_id, event.group_id, event.kind, event.lag, event.partitions],
    "events_of_rule": list(rule.events.values_list("id", flat=True)),
    "clusters": [op.cluster, rule.cluster],
    "types": sorted(
        (ct.app_label, ct.model) for ct in ContentType.objects.filter(
            model__in=["operation", "alertrule", "alertevent"])
    ),
}))
"""


# The steps that set a database up, and the upgrades test_old_layout_rows_survive_the_move
# does not run as the operator types them, skip Django's system checks (URLs, views and
# the cluster client they import: ~3 s of CPU a run, more than the migration itself);
# its upgrade to the new layout, `migrate --no-input`, runs them as an operator's does.
QUICK = ("--no-input", "--skip-checks")


def manage(tmp: Path, *args: str) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "QUILL_STATE_DIR": str(tmp),
        "QUILL_DB_PATH": str(tmp / "console.sqlite3"),
        "QUILL_SECRET_KEY": "migration-test",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def schema(db: Path) -> dict[str, str]:
    """The three tables' and their indexes' SQL, by name."""
    marks = ",".join("?" * len(TABLES))
    with sqlite3.connect(db) as conn:
        return dict(
            conn.execute(
                f"SELECT name, sql FROM sqlite_master WHERE tbl_name IN ({marks})"
                " AND sql IS NOT NULL",
                TABLES,
            )
        )


def test_old_layout_rows_survive_the_move(tmp_path):
    db = tmp_path / "console.sqlite3"
    manage(tmp_path, "migrate", "console", "0004_redact_scram_in_audit", *QUICK)
    with sqlite3.connect(db) as conn:
        assert {r[0] for r in conn.execute("SELECT app, name FROM django_migrations")} >= {
            "console"
        }
        assert not conn.execute(
            "SELECT 1 FROM django_migrations WHERE app IN ('operations', 'alerts')"
        ).fetchall()
        old_types = dict(
            conn.execute(
                "SELECT model, id FROM django_content_type WHERE app_label = 'console'"
                " AND model IN ('operation', 'alertrule', 'alertevent')"
            )
        )
        conn.execute(
            "INSERT INTO console_operation (id, kind, params, username, source, state,"
            " progress, steps, checkpoint, error, cancel_requested, pause_requested,"
            " lease_owner, attempts, created, updated) VALUES (41, 'reassign',"
            " '{\"throttle\": 1000}', 'ops', 'api', 'succeeded', '{\"percent\": 100.0}',"
            " '[]', '{}', '', 0, 0, '', 1, '2026-11-20 10:00:00', '2026-11-20 10:05:00')"
        )
        conn.execute(
            'INSERT INTO console_alertrule (id, name, "group", statuses, max_lag_ms,'
            " webhook_url, emails, enabled, created) VALUES (7, 'orders lag', 'orders-*',"
            " '[\"ERR\"]', 60000, '', '[\"ops@example.com\"]', 1, '2026-11-20 10:00:00')"
        )
        conn.execute(
            "INSERT INTO console_alertevent (id, rule_id, group_id, kind, status, lag,"
            " lag_ms, partitions, reason, delivered, at) VALUES (9, 7, 'orders-1', 'firing',"
            ' \'ERR\', 1234, 70000, \'[{"topic": "orders", "partition": 0}]\','
            " 'status ERR', '{}', '2026-11-20 10:01:00')"
        )
    assert set(old_types) == {"operation", "alertrule", "alertevent"}
    before = schema(db)

    out = manage(tmp_path, "migrate", "console", "0005_operations_and_alerts_apps", *QUICK)
    assert "Applying operations.0001_initial... OK" in out
    assert "Applying alerts.0001_initial... OK" in out
    assert "Applying console.0005_operations_and_alerts_apps... OK" in out

    # the same tables and indexes, byte for byte: nothing was made, dropped or rebuilt
    assert set(TABLES) < set(before)
    assert schema(db) == before
    # the later migrations (a cluster column, issue 29) add to the moved tables
    out = manage(tmp_path, "migrate", "--no-input")
    assert "Applying operations.0002_cluster... OK" in out
    assert "Applying alerts.0002_cluster... OK" in out

    rows = json.loads(manage(tmp_path, "shell", "-c", READ_BACK).strip().splitlines()[-1])
    assert rows["op"] == [
        41,
        "reassign",
        "succeeded",
        {"throttle": 1000},
        {"percent": 100.0},
        "ops",
    ]
    assert rows["rule"] == [7, "orders lag", "orders-*", ["ERR"], 60000, ["ops@example.com"]]
    assert rows["event"] == [
        9,
        7,
        "orders-1",
        "firing",
        1234,
        [{"topic": "orders", "partition": 0}],
    ]
    assert rows["events_of_rule"] == [9]
    assert rows["clusters"] == ["default", "default"]  # rows made before: the one cluster
    # the content types moved with the models (permissions keep pointing at them)
    assert rows["types"] == [
        ["alerts", "alertevent"],
        ["alerts", "alertrule"],
        ["operations", "operation"],
    ]
    with sqlite3.connect(db) as conn:
        moved = dict(
            conn.execute(
                "SELECT model, id FROM django_content_type"
                " WHERE model IN ('operation', 'alertrule', 'alertevent')"
            )
        )
    assert moved == old_types

    # and a second migrate has nothing left to do
    assert "No migrations to apply" in manage(tmp_path, "migrate", *QUICK)


# Task names and job kinds as main had them before the move: messages queued, beat
# entries and Operation.kind values written then must still find their code.
TASKS_BEFORE = {"quill.ping", "quill.operation.run", "quill.operation.scan_orphans"}
TASKS_BEFORE |= {"quill.alerts.evaluate"}
KINDS_BEFORE = {"reassign", "rebalance", "elect-leaders", "compact", "rolling-restart"}
KINDS_BEFORE |= {"decommission"}


def test_task_names_and_job_kinds_are_the_ones_stored_before():
    from operations import jobs
    from operations.models import KINDS
    from workers.celery import app

    app.loader.import_default_modules()  # what `celery -A workers worker` imports
    assert TASKS_BEFORE <= set(app.tasks)
    assert {entry["task"] for entry in app.conf.beat_schedule.values()} <= set(app.tasks)
    assert set(KINDS) == KINDS_BEFORE == set(jobs.RUNNERS)


PER_CLUSTER_READ_BACK = """
import json
from console.models import AuditEntry, TopicSchema
TopicSchema.objects.create(cluster="beta", topic="orders", part="value", kind="avro",
                           schema="{}", updated_by="ops")
print(json.dumps({
    "schemas": sorted(TopicSchema.objects.values_list("cluster", "topic", "part")),
    "audit": list(AuditEntry.objects.values_list("cluster", "action")),
}))
"""


def test_schemas_and_audit_entries_made_before_belong_to_the_default_cluster(tmp_path):
    """console 0007 (issue 29): uploaded schemas and audit entries get a cluster column;
    rows made before are the one cluster's ("default"), and another cluster may then
    have a schema for a topic of the same name."""
    db = tmp_path / "console.sqlite3"
    manage(tmp_path, "migrate", "console", "0006_topic_schemas", *QUICK)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO console_topicschema (topic, part, kind, schema, message, updated,"
            " updated_by) VALUES ('orders', 'value', 'avro', '{}', '', '2026-11-27', 'ops')"
        )
        conn.execute(
            "INSERT INTO console_auditentry (at, username, source, action, target, ok,"
            " detail) VALUES ('2026-11-27', 'ops', 'api', 'schema.set', 'topic:orders', 1, '')"
        )
    out = manage(tmp_path, "migrate", *QUICK)
    assert "Applying console.0007_topicschema_cluster_and_audit_cluster... OK" in out
    rows = json.loads(manage(tmp_path, "shell", "-c", PER_CLUSTER_READ_BACK).splitlines()[-1])
    assert rows == {
        "schemas": [["beta", "orders", "value"], ["default", "orders", "value"]],
        "audit": [["default", "schema.set"]],
    }
