"""Audit entries written before SCRAM credentials were redacted kept a user's salt,
stored key and server key in before/after (quota changes of users): cut them to the
mechanism's iterations, as new entries are."""

from django.db import migrations

from cluster_client import redact


def scrub(apps, schema_editor):
    AuditEntry = apps.get_model("console", "AuditEntry")
    for entry in AuditEntry.objects.filter(action__startswith="quota."):
        before, after = redact.config(entry.before), redact.config(entry.after)
        if (before, after) != (entry.before, entry.after):
            entry.before, entry.after = before, after
            entry.save(update_fields=["before", "after"])


class Migration(migrations.Migration):
    dependencies = [("console", "0003_alerts")]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop)]
