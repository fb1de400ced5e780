"""`GET /api/health`: liveness, no authentication."""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError, connection
from django.http import HttpRequest
from ninja import Router

from .schemas import ErrorOut, HealthOut

router = Router(tags=["health"])
logger = logging.getLogger("sessions_app")


@router.get("/health", auth=None, response={200: HealthOut, 503: ErrorOut})
def health(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    """Liveness: the process answers and the database is reachable."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        logger.exception("health check: the database is unreachable")
        return 503, {"detail": "database unreachable"}
    return 200, {"status": "ok", "database": "ok"}
