"""Operation, AlertRule and AlertEvent now belong to the operations and alerts apps
(operations/migrations/0001_initial.py, alerts/migrations/0001_initial.py), which took
them over with their tables: the console forgets them, and no table is dropped."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_redact_scram_in_audit"),
        ("operations", "0001_initial"),
        ("alerts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="AlertEvent"),
                migrations.DeleteModel(name="AlertRule"),
                migrations.DeleteModel(name="Operation"),
            ],
        ),
    ]
