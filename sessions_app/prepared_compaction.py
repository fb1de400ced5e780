"""Compaction ahead of time and overflow recovery: the stored fields
(docs/behaviour.md#prepared-compaction, #overflow-recovery).

`PreparedCompaction` is a compaction a background job wrote before the session reached its
threshold, kept until a check applies it (or finds it stale). It is not a `Compaction` row:
a prepared result is a candidate, not a point of the log; it has no number, is not counted,
cannot be reverted, and at most one exists per session (a newer one replaces it).

The mixins hold the fields these features add to existing models (`prepare_at` on a
profile, `upstream_window` on a session, `prepared_at` on a compaction point), in one place.
Re-exported by sessions_app.models (where Django looks for the app's models).
"""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

__all__ = ["LearnedWindow", "PrepareSettings", "PreparedAt", "PreparedCompaction"]


class PrepareSettings(models.Model):
    """A profile's soft threshold: past it, a compaction is prepared in the background."""

    prepare_at = models.FloatField(
        null=True,
        blank=True,
        default=0.8,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the context limit past which a compaction is prepared in the "
        "background, to be applied at the threshold; empty: compact in the request that "
        "reaches the threshold.",
    )

    class Meta:
        abstract = True


class LearnedWindow(models.Model):
    """The window a session's upstream really has, learned from its refusal."""

    upstream_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens: the window the upstream refused beyond (learned from a 'too long' "
        "answer); compactions aim under it. Empty: the context limit.",
    )

    class Meta:
        abstract = True


class PreparedAt(models.Model):
    """When a compaction point applied at the threshold was prepared (its `created_at` is
    when it was applied)."""

    prepared_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was prepared in the background (if it was)."
    )

    class Meta:
        abstract = True


class PreparedCompaction(models.Model):
    """A compaction of a session's context written ahead of time, not applied yet.

    It holds the engine's output for the entries `entry_ids` as they were at the session's
    `context_revision`: it is applied only while that revision holds (appends leave it
    alone; a compaction, revert, offload or edit of entries bumps it).
    """

    session = models.OneToOneField(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="prepared_compaction"
    )
    prepared_at = models.DateTimeField()
    context_revision = models.PositiveIntegerField()
    version = models.PositiveIntegerField(help_text="The session's version it was prepared at.")
    #: The context entries the engine read, in order, and the trailing one it left out.
    entry_ids = models.JSONField(default=list)
    pending_ids = models.JSONField(default=list)
    first_position = models.PositiveIntegerField(null=True, blank=True)
    last_position = models.PositiveIntegerField(null=True, blank=True)
    #: The engine's output: new or changed messages whole, untouched entries as references.
    output = models.JSONField(default=list, encoder=DjangoJSONEncoder)
    #: What the Compaction row will record (writeback.CommitMeta's fields).
    meta = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    tokens_before = models.PositiveBigIntegerField(default=0)
    tokens_after = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"Prepared compaction of {self.session_id} (revision {self.context_revision})"
