"""`GET /api/health`: liveness, no authentication."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.http import HttpRequest
from ninja import Router

from .schemas import ErrorOut, HealthOut

router = Router(tags=["health"])


@router.get("/health", auth=None, response={200: HealthOut, 503: ErrorOut})
def health(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    """Liveness: the process answers and the database is reachable."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return 503, {"detail": "database unreachable"}
    return 200, {"status": "ok", "database": "ok"}
