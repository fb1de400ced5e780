"""What a `Compaction` row records: a compaction point, or the record of an offload.

No column of its own: an offload's record has the strategy `CompactionKind.OFFLOAD`
(services/compacting/offloading.py), every other row is a compaction point. The model
(`Compaction.Kind`, `is_offload`, `Compaction.objects.offloads()`) is the only place that
reads the strategy for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from .models import Compaction  # noqa: F401 (named by the queryset's base, a string)

__all__ = ["CompactionKind", "CompactionQuerySet", "KindOfCompaction"]


class CompactionKind(models.TextChoices):
    """A compaction point folds entries behind a marker; an offload's record changed entries
    in place (tool results moved to files): it folds nothing, has no marker and is no
    compaction point (`Session.compaction_count`)."""

    COMPACTION = "compaction"
    OFFLOAD = "offload"


class CompactionQuerySet(models.QuerySet["Compaction"]):
    """Compaction rows by kind."""

    def offloads(self) -> CompactionQuerySet:
        """Only the records of offloads."""
        return self.filter(strategy=CompactionKind.OFFLOAD)

    def points(self) -> CompactionQuerySet:
        """Only compaction points (every row but an offload's record)."""
        return self.exclude(strategy=CompactionKind.OFFLOAD)


class KindOfCompaction:
    """The kind of a Compaction row, read from its `strategy` (mixed into the model)."""

    strategy: Any

    @property
    def kind(self) -> CompactionKind:
        """`OFFLOAD` for an offload's record, else `COMPACTION`."""
        if self.strategy == CompactionKind.OFFLOAD:
            return CompactionKind.OFFLOAD
        return CompactionKind.COMPACTION

    @property
    def is_offload(self) -> bool:
        """True for the record of an offload (it changed entries in place, folds nothing)."""
        return self.kind == CompactionKind.OFFLOAD

    @property
    def is_point(self) -> bool:
        """True for a compaction point: it folds entries behind a marker (not an offload)."""
        return self.kind == CompactionKind.COMPACTION
