"""Named summarizer configurations (SummarizerConfig) referenced by profiles, and the
profiles' summary_input_limit (docs/summarizers.md). Schema only: no data moves."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0003_content_as_json_text"),
    ]

    operations = [
        migrations.CreateModel(
            name="SummarizerConfig",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.SlugField(max_length=64, unique=True)),
                ("description", models.TextField(blank=True)),
                (
                    "provider",
                    models.CharField(
                        choices=[
                            ("extractive", "Extractive (offline, deterministic)"),
                            ("anthropic", "Anthropic Messages API (or a compatible server)"),
                            (
                                "openai",
                                "OpenAI Chat Completions (Azure, Ollama, vLLM, OpenRouter...)",
                            ),
                            ("custom", "Custom class (dotted path)"),
                        ],
                        default="extractive",
                        max_length=16,
                    ),
                ),
                (
                    "model",
                    models.CharField(
                        blank=True,
                        help_text="Required for anthropic and openai, e.g. gpt-4o-mini.",
                        max_length=200,
                    ),
                ),
                (
                    "base_url",
                    models.CharField(
                        blank=True,
                        help_text="http(s) URL of the API; empty: the provider's own (or its *_BASE_URL env var).",
                        max_length=500,
                        verbose_name="base URL",
                    ),
                ),
                (
                    "api_key_env",
                    models.CharField(
                        blank=True,
                        help_text="The NAME of the environment variable holding the key (e.g. OPENAI_API_KEY), read when a compaction runs; the key itself is never stored.",
                        max_length=128,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z_][A-Za-z0-9_]*\\Z",
                                "Enter the name of an environment variable (letters, digits and underscores, not starting with a digit), not the key itself.",
                            )
                        ],
                        verbose_name="API key environment variable",
                    ),
                ),
                (
                    "max_tokens",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Cap of one summary answer; empty: the profile's summary_max_tokens.",
                        null=True,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(1000000),
                        ],
                    ),
                ),
                (
                    "timeout_seconds",
                    models.FloatField(
                        blank=True,
                        help_text="Per request, in (0, 600]; empty: the profile's summary_timeout_seconds.",
                        null=True,
                        validators=[django.core.validators.MaxValueValidator(600.0)],
                    ),
                ),
                (
                    "class_path",
                    models.CharField(
                        blank=True,
                        help_text="Custom provider only: dotted path of a summarizer class.",
                        max_length=300,
                        verbose_name="class path",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "summarizer configuration",
                "ordering": ["name"],
            },
        ),
        migrations.AddField(
            model_name="compactionprofile",
            name="summary_input_limit",
            field=models.PositiveIntegerField(
                default=100000,
                help_text="Tokens one summary request may carry; a larger middle is summarized in parts, then the part summaries are merged.",
                validators=[
                    django.core.validators.MinValueValidator(2000),
                    django.core.validators.MaxValueValidator(10000000),
                ],
            ),
        ),
        migrations.AddField(
            model_name="compactionprofile",
            name="summarizer_config",
            field=models.ForeignKey(
                blank=True,
                help_text="When set, writes this profile's summaries (the summarizer choice and summary_model are then unused). See docs/summarizers.md.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="profiles",
                to="sessions_app.summarizerconfig",
                verbose_name="summarizer configuration",
            ),
        ),
    ]
