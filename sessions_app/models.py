"""Stored agent sessions: full history, runtime context, compaction points, profiles, API keys.

`Message` is the append-only full history; `ContextEntry` is what the model sees now
(docs/behaviour.md#runtime-context-and-history); a `Compaction` replaces a run of entries with one
summary entry and archives the entries it replaced.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from compaction import Policy

from .api_key import ApiKey as ApiKey  # re-exported: Django finds models through this module
from .compaction_kind import CompactionKind, CompactionQuerySet, KindOfCompaction
from .importers import import_formats
from .jsontext import JSONTextField
from .prepared_compaction import LearnedWindow, PreparedAt, PrepareSettings
from .prepared_compaction import PreparedCompaction as PreparedCompaction  # re-exported
from .summarizer_config import SummarizerConfig as SummarizerConfig  # re-exported

_ratio = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class CompactionProfile(PrepareSettings, models.Model):
    """A named policy, editable in the admin; read fresh on every compaction
    (docs/behaviour.md#profiles)."""

    class SummarizerKind(models.TextChoices):
        AUTO = "auto", "Anthropic when a key is configured, else extractive"
        ANTHROPIC = "anthropic", "Anthropic Messages API"
        EXTRACTIVE = "extractive", "Extractive (offline, deterministic)"

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    is_default = models.BooleanField(default=False, help_text="Used when a session names none.")
    summarizer = models.CharField(
        max_length=16, choices=SummarizerKind.choices, default=SummarizerKind.AUTO
    )
    summarizer_config = models.ForeignKey(
        SummarizerConfig,
        null=True,
        blank=True,
        on_delete=models.PROTECT,  # deleting a configuration in use must not switch models
        related_name="profiles",
        verbose_name="summarizer configuration",
        help_text="When set, writes this profile's summaries (the summarizer choice and "
        "summary_model are then unused). See docs/summarizers.md.",
    )
    # Policy fields (compaction.Policy): same names, same defaults.
    encoding = models.CharField(max_length=32, default="o200k_base")
    context_limit = models.PositiveIntegerField(default=200_000)
    trigger_ratio = models.FloatField(default=0.92, validators=_ratio)
    hard_limit = models.PositiveIntegerField(null=True, blank=True)
    safety_factor = models.FloatField(default=1.0, validators=[MinValueValidator(0.01)])
    enabled = models.BooleanField(default=True)
    tail_retention_ratio = models.FloatField(
        default=0.2,
        validators=_ratio,
        help_text="Share of the context limit kept as the recent tail; 0: a count-only tail "
        "of exactly keep_recent_messages messages.",
    )
    keep_recent_messages = models.PositiveIntegerField(default=10)
    summary_max_tokens = models.PositiveIntegerField(default=1000)
    summary_model = models.CharField(max_length=128, blank=True)
    max_retries = models.PositiveIntegerField(default=2)
    retry_backoff_seconds = models.FloatField(default=1.0, validators=[MinValueValidator(0.0)])
    summary_timeout_seconds = models.FloatField(default=30.0, validators=[MinValueValidator(0.1)])
    # The Policy's default and bounds (a 128k-token model's share; room for the prompt).
    summary_input_limit = models.PositiveIntegerField(
        default=100_000,
        validators=[MinValueValidator(2_000), MaxValueValidator(10_000_000)],
        help_text="Tokens one summary request may carry; a larger middle is summarized in "
        "parts, then the part summaries are merged.",
    )
    max_summary_calls = models.PositiveIntegerField(
        default=32,
        validators=[MinValueValidator(1), MaxValueValidator(10_000)],
        help_text="Summary requests one compaction may make (parts, merges, the retention "
        "check's second request); a middle needing more is refused "
        "(docs/behaviour.md#summary-call-limit).",
    )
    steps = models.JSONField(default=list, blank=True)
    tool_blocks_keep_recent = models.PositiveIntegerField(default=5)
    tool_call_threshold = models.PositiveIntegerField(default=500)
    tool_result_threshold = models.PositiveIntegerField(default=600)
    preview_tokens = models.PositiveIntegerField(default=200)
    dialogue_rounds_keep_min = models.PositiveIntegerField(default=12)
    cooldown_seconds = models.FloatField(default=8.0, validators=[MinValueValidator(0.0)])
    fold_max_tokens = models.PositiveIntegerField(default=10_000)
    fold_merge_functions = models.BooleanField(default=True)
    fold_max_line_span = models.PositiveIntegerField(default=100)
    fold_seed = models.PositiveIntegerField(default=0)
    smart_truncate_max_tokens = models.PositiveIntegerField(default=50_000)
    middle_start = models.FloatField(default=1 / 6, validators=_ratio)
    middle_end = models.FloatField(default=5 / 6, validators=_ratio)
    file_view_tools = models.JSONField(default=list, blank=True)
    offload_min_chars = models.PositiveIntegerField(default=100)
    min_recall = models.FloatField(default=0.8, validators=_ratio)
    updated_at = models.DateTimeField(auto_now=True)
    proxy_mode = models.CharField(
        max_length=16,
        choices=[("compact", "compact"), ("observe", "observe (record only)")],
        default="compact",
        help_text="The proxy's mode (README): X-Ctxweb-Mode overrides it per request.",
    )
    recall_line = models.BooleanField(
        default=True,
        help_text="Summaries name their range and session in one line, for the MCP server's "
        "read_messages tool (while the MCP server is enabled: CTXWEB_MCP_ENABLED).",
    )

    #: Model fields that map one to one onto compaction.Policy fields.
    POLICY_FIELDS = (
        "encoding",
        "context_limit",
        "trigger_ratio",
        "hard_limit",
        "safety_factor",
        "enabled",
        "tail_retention_ratio",
        "keep_recent_messages",
        "summary_max_tokens",
        "summary_model",
        "max_retries",
        "retry_backoff_seconds",
        "summary_timeout_seconds",
        "summary_input_limit",
        "max_summary_calls",
        "steps",
        "tool_blocks_keep_recent",
        "tool_call_threshold",
        "tool_result_threshold",
        "preview_tokens",
        "dialogue_rounds_keep_min",
        "cooldown_seconds",
        "fold_max_tokens",
        "fold_merge_functions",
        "fold_max_line_span",
        "fold_seed",
        "smart_truncate_max_tokens",
        "middle_start",
        "middle_end",
        "file_view_tools",
        "offload_min_chars",
        "min_recall",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def to_policy(self, *, context_limit: int | None = None) -> Policy:
        """This profile as an engine Policy (raises compaction.PolicyError when invalid)."""
        values: dict[str, Any] = {name: getattr(self, name) for name in self.POLICY_FIELDS}
        values["summary_model"] = values["summary_model"] or None
        for key in ("steps", "file_view_tools"):
            if values[key]:
                values[key] = tuple(values[key])
            else:
                del values[key]  # empty: the Policy default
        if context_limit and context_limit != self.context_limit:
            values["context_limit"] = context_limit
            if self.hard_limit is not None:
                # An absolute hard limit belongs to the profile's context limit: scale it.
                values["hard_limit"] = max(
                    round(self.hard_limit * context_limit / self.context_limit),
                    int(context_limit * self.trigger_ratio),
                )
        return Policy(name=self.name, **values)


class Session(LearnedWindow, models.Model):
    """One agent session: its full history, runtime context and compaction points."""

    class SourceFormat(models.TextChoices):
        """A session made through the API; the others are the import formats' names."""

        API = "api", "API"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions"
    )
    title = models.CharField(max_length=300, blank=True)
    source_format = models.CharField(
        max_length=16,
        # Every import format registered (importers/registry.py); a new built-in one adds a
        # choice, a migration that changes no column.
        choices=[*SourceFormat.choices, *((f.name, f.label) for f in import_formats())],
        default=SourceFormat.API,
    )
    external_id = models.CharField(max_length=200, blank=True, help_text="Id in the source tool.")
    model = models.CharField(max_length=128, blank=True)
    context_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Overrides the profile's context limit."
    )
    profile = models.ForeignKey(
        CompactionProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="subagents"
    )
    parent_tool_use_id = models.CharField(max_length=200, blank=True)
    raw_source = models.FileField(upload_to="sources/", blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0, help_text="Optimistic lock.")
    context_revision = models.PositiveIntegerField(
        default=0,
        help_text="Bumped when existing context entries change (compaction, revert, offload); "
        "appends only add entries and leave it alone.",
    )
    next_position = models.PositiveIntegerField(default=0)
    cooldown_until = models.DateTimeField(
        null=True, blank=True, help_text="Automatic compaction is skipped until then."
    )
    compaction_failures = models.PositiveIntegerField(
        default=0, help_text="Consecutive failed automatic compactions."
    )
    # Cached totals, kept current by sessions_app.services.
    message_count = models.PositiveIntegerField(default=0)
    history_tokens = models.PositiveBigIntegerField(default=0)
    context_tokens = models.PositiveBigIntegerField(default=0)
    context_entry_count = models.PositiveIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)
    last_usage = models.JSONField(null=True, blank=True)
    next_seq = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    # The transparent proxy (sessions_app/proxy/): how a proxied conversation is recognised.
    proxy_key = models.CharField(
        max_length=200, blank=True, db_index=True, help_text="Conversation key of the proxy."
    )
    proxy_state = models.JSONField(
        null=True,
        blank=True,
        help_text="Proxy bookkeeping: message map, system and tools token counts and digest.",
    )
    # Written only when the request's system prompt or tools change (services/proxying/turns.py).
    proxy_overhead = models.JSONField(
        null=True, blank=True, help_text="The proxy's latest system prompt and tool definitions."
    )
    # Where an imported session comes from, so re-importing it updates it (README, "Watching
    # local transcripts").
    source_path = models.CharField(
        max_length=1024, blank=True, db_index=True, help_text="The transcript file read."
    )
    source_offset = models.PositiveBigIntegerField(
        default=0, help_text="Bytes of the source file read (whole lines)."
    )
    source_fingerprint = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the file's head when last read."
    )
    source_resume_offset = models.PositiveBigIntegerField(
        default=0, help_text="Where the next read starts: the newest clean cut of the file."
    )
    source_resume_seq = models.PositiveIntegerField(
        default=0, help_text="Sequence number of the first message read from the cut."
    )

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or str(self.id)


class Message(models.Model):
    """One message of the full history; append-only, never edited by compaction."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=16)
    content = JSONTextField()  # read back as text by the context API (jsontext.py)
    extra = models.JSONField(default=dict, blank=True, help_text="Keys passed through untouched.")
    token_count = models.PositiveIntegerField(default=0)
    original_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_session_seq_unique")
        ]
        # Search hits come newest first (selectors/search.py): a word in most messages is
        # answered by walking this index until a page is found, not by sorting every match.
        indexes = [models.Index(fields=["created_at", "id"], name="message_time_id")]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.role}"

    def as_dict(self) -> dict[str, Any]:
        """The canonical engine message: role, content and the extra keys."""
        return {**self.extra, "role": self.role, "content": self.content}


class Compaction(KindOfCompaction, PreparedAt, models.Model):
    """One compaction point: what it replaced, its summary, its stats and its archive; or
    the record of an offload (`kind`, sessions_app/compaction_kind.py)."""

    Kind = CompactionKind

    class Trigger(models.TextChoices):
        AUTO = "auto"
        MANUAL = "manual"
        API = "api"
        HARD_LIMIT = "hard_limit"
        IMPORTED = "imported"
        OVERFLOW = "overflow"

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        REVERTED = "reverted"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compactions")
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    strategy = models.CharField(max_length=64, blank=True, help_text="Profile or steps that ran.")
    summarizer = models.CharField(max_length=128, blank=True)
    model = models.CharField(max_length=128, blank=True)
    instructions = models.TextField(blank=True)
    first_seq = models.PositiveIntegerField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(null=True, blank=True)
    first_position = models.PositiveIntegerField(
        null=True, blank=True, help_text="Context positions of the entries it replaced."
    )
    last_position = models.PositiveIntegerField(null=True, blank=True)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The later compaction that re-summarized this one's summary.",
    )
    summary = models.TextField(blank=True)
    tokens_before = models.PositiveBigIntegerField(default=0)
    tokens_after = models.PositiveBigIntegerField(default=0)
    messages_before = models.PositiveIntegerField(default=0)
    messages_after = models.PositiveIntegerField(default=0)
    compacted_message_count = models.PositiveIntegerField(default=0)
    retained_message_count = models.PositiveIntegerField(default=0)
    ratio = models.FloatField(null=True, blank=True)
    recall = models.FloatField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SUCCEEDED)
    failure_reason = models.CharField(max_length=64, blank=True)
    details = models.JSONField(default=dict, blank=True, help_text="Steps, events, import data.")
    archive = models.FileField(upload_to="archives/", blank=True)
    # The policy in force when it ran (None: not known, e.g. an imported compaction).
    context_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens: the context limit in force when it ran."
    )
    threshold_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens: the compaction threshold in force when it ran."
    )
    hard_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens: the hard limit in force when it ran."
    )

    objects = CompactionQuerySet.as_manager()

    class Meta:
        ordering = ["session", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "number"], name="compaction_session_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"Compaction #{self.number} of {self.session_id}"


class ContextEntry(models.Model):
    """One entry of the runtime context: an original message (maybe transformed) or a summary."""

    class Kind(models.TextChoices):
        MESSAGE = "message"
        SUMMARY = "summary"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="context_entries")
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    compaction = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    role = models.CharField(max_length=16)
    content = JSONTextField(null=True, blank=True, help_text="Null: the message's content.")
    extra = models.JSONField(default=dict, blank=True)
    token_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["session", "position"]
        indexes = [models.Index(fields=["session", "position"])]

    def __str__(self) -> str:
        return f"{self.session_id}@{self.position} {self.kind}"


# Re-exported: Django finds the app's models through this module.
from .compaction_job import CompactionJob as CompactionJob  # noqa: E402
from .counters import RateCounter as RateCounter  # noqa: E402
