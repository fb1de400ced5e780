"""Migration 0009 fills the limits in force of older compactions from their recorded policy."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone

from sessions_app.models import Compaction

pytestmark = pytest.mark.django_db

migration = importlib.import_module("sessions_app.migrations.0009_compaction_policy_in_force")


def test_older_rows_get_their_limits_from_the_recorded_policy(make_session: Any) -> None:
    session = make_session()
    policy = {"context_limit": 8000, "trigger_ratio": 0.75, "hard_limit": None}
    rows = [
        Compaction.objects.create(
            session=session, number=n, created_at=timezone.now(), trigger="manual", details=d
        )
        for n, d in enumerate(
            [{"policy": policy}, {"policy": {**policy, "hard_limit": 7900}}, {}, {"policy": 3}],
            start=1,
        )
    ]
    migration.fill_from_details(apps, None)
    filled = [
        (r.context_limit, r.threshold_tokens, r.hard_limit)
        for r in Compaction.objects.filter(pk__in=[r.pk for r in rows]).order_by("number")
    ]
    unknown = (None, None, None)
    assert filled == [(8000, 6000, 8000), (8000, 6000, 7900), unknown, unknown]
