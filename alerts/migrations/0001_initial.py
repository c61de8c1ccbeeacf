"""AlertRule and AlertEvent, moved from the console app with their tables
(console_alertrule, console_alertevent) and rows: state only, no table is made or rebuilt."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def take_content_types(apps, schema_editor):
    """Permissions and admin log entries point at the content types: keep them."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in ("alertrule", "alertevent"):
        if not ContentType.objects.filter(app_label="alerts", model=model).exists():
            ContentType.objects.filter(app_label="console", model=model).update(app_label="alerts")


class Migration(migrations.Migration):
    initial = True
    dependencies = [
        ("console", "0003_alerts"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table is there already (console/migrations/0003_alerts.py made it): the
            # model only changes app, and keeps its table by Meta.db_table.
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="AlertRule",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("group", models.CharField(max_length=255)),
                        ("statuses", models.JSONField(default=list)),
                        ("max_lag_ms", models.BigIntegerField(blank=True, null=True)),
                        ("webhook_url", models.URLField(blank=True, max_length=500)),
                        ("emails", models.JSONField(default=list)),
                        ("enabled", models.BooleanField(default=True)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_alertrule",
                        "ordering": ["name", "id"],
                    },
                ),
                migrations.CreateModel(
                    name="AlertEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("group_id", models.CharField(db_index=True, max_length=255)),
                        ("kind", models.CharField(max_length=10)),
                        ("status", models.CharField(max_length=10)),
                        ("lag", models.BigIntegerField(default=0)),
                        ("lag_ms", models.BigIntegerField(blank=True, null=True)),
                        ("partitions", models.JSONField(default=list)),
                        ("reason", models.TextField(blank=True)),
                        ("delivered", models.JSONField(default=dict)),
                        ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        (
                            "rule",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="events",
                                to="alerts.alertrule",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_alertevent",
                        "ordering": ["-at", "-id"],
                    },
                ),
            ],
        ),
        migrations.RunPython(take_content_types, migrations.RunPython.noop),
    ]
