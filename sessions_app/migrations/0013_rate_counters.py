"""Throttle counters kept in the database when the cache cannot count atomically
(sessions_app/counters.py, docs/deployment.md#throttles)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0012_summary_call_limit")]

    operations = [
        migrations.CreateModel(
            name="RateCounter",
            fields=[
                ("key", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("count", models.PositiveIntegerField(default=0)),
                ("expires_at", models.DateTimeField(db_index=True)),
            ],
        ),
    ]
