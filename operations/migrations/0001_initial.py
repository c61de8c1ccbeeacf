"""The Operation model, moved from the console app with its table (console_operation)
and its rows: state only, no table is made or rebuilt."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def take_content_types(apps, schema_editor):
    """Permissions and admin log entries point at the content types: keep them."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in ("operation",):
        if not ContentType.objects.filter(app_label="operations", model=model).exists():
            ContentType.objects.filter(app_label="console", model=model).update(
                app_label="operations"
            )


class Migration(migrations.Migration):
    initial = True
    dependencies = [
        ("console", "0002_operation"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table is there already (console/migrations/0002_operation.py made it): the
            # model only changes app, and keeps its table by Meta.db_table.
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Operation",
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
                        ("kind", models.CharField(db_index=True, max_length=32)),
                        ("params", models.JSONField(default=dict)),
                        ("username", models.CharField(max_length=150)),
                        ("source", models.CharField(default="ui", max_length=8)),
                        (
                            "state",
                            models.CharField(db_index=True, default="pending", max_length=16),
                        ),
                        ("progress", models.JSONField(default=dict)),
                        ("steps", models.JSONField(default=list)),
                        ("checkpoint", models.JSONField(default=dict)),
                        ("result", models.JSONField(blank=True, null=True)),
                        ("error", models.TextField(blank=True)),
                        ("cancel_requested", models.BooleanField(default=False)),
                        ("pause_requested", models.BooleanField(default=False)),
                        ("lease_owner", models.CharField(blank=True, max_length=200)),
                        ("lease_until", models.DateTimeField(blank=True, null=True)),
                        ("attempts", models.PositiveIntegerField(default=0)),
                        ("created", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("started", models.DateTimeField(blank=True, null=True)),
                        ("finished", models.DateTimeField(blank=True, null=True)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        (
                            "user",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_operation",
                        "ordering": ["-created", "-id"],
                    },
                ),
            ],
        ),
        migrations.RunPython(take_content_types, migrations.RunPython.noop),
    ]
