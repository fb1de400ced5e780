"""A profile bounds the summary requests one compaction may make (`max_summary_calls`,
docs/behaviour.md#summary-call-limit); existing profiles get the Policy default, 32."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0011_one_active_job_per_session")]

    operations = [
        migrations.AddField(
            model_name="compactionprofile",
            name="max_summary_calls",
            field=models.PositiveIntegerField(
                default=32,
                help_text="Summary requests one compaction may make (parts, merges, the "
                "retention check's second request); a middle needing more is refused "
                "(docs/behaviour.md#summary-call-limit).",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(10000),
                ],
            ),
        ),
    ]
