"""The transparent proxy's conversation key and bookkeeping on Session."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0005_session_source")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="proxy_key",
            field=models.CharField(
                blank=True,
                db_index=True,
                help_text="Conversation key of the proxy.",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="proxy_state",
            field=models.JSONField(
                blank=True,
                help_text="Proxy bookkeeping: message digests, system, tools.",
                null=True,
            ),
        ),
    ]
