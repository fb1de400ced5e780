"""The transparent proxy's mode on each compaction profile (compact or observe)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0006_proxy")]

    operations = [
        migrations.AddField(
            model_name="compactionprofile",
            name="proxy_mode",
            field=models.CharField(
                choices=[("compact", "compact"), ("observe", "observe (record only)")],
                default="compact",
                help_text="The proxy's mode (README): X-Ctxweb-Mode overrides it per request.",
                max_length=16,
            ),
        ),
    ]
