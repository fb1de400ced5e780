"""`GET /api/health`: liveness and the state of each dependency, no authentication."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema

from sessions_app.services.background.health import health_report

from .schemas import ErrorOut, HealthOut

router = Router(tags=["health"])


class HealthCheckOut(Schema):
    status: str = Field(description="ok or error")
    required: bool = Field(description="true: the service answers 503 while this fails")
    detail: str = ""


class HealthWorkerOut(HealthCheckOut):
    status: str = Field(description="ok, stale or absent")
    age_seconds: float | None = Field(None, description="age of the last worker heartbeat")
    state: str = Field("", description="what the worker last said it was doing")


class HealthChecksOut(Schema):
    database: HealthCheckOut
    storage: HealthCheckOut
    worker: HealthWorkerOut


class HealthReportOut(HealthOut):
    """`status` is ok, or degraded when only the (not required) worker check is not ok."""

    checks: HealthChecksOut


class HealthFailureOut(ErrorOut):
    """A required dependency failed: `detail` names it, `checks` says which."""

    status: str
    database: str
    checks: HealthChecksOut


@router.get("/health", auth=None, response={200: HealthReportOut, 503: HealthFailureOut})
def health(request: HttpRequest) -> tuple[int, dict[str, Any]]:  # noqa: ARG001 (ninja)
    """Database (a rolled-back write), storage (a probe file) and worker (heartbeat age)."""
    report = health_report()
    body: dict[str, Any] = {
        "status": report.status,
        "database": report.database.status,
        "checks": report.checks(),
    }
    if report.problems:
        return 503, {"detail": "; ".join(report.problems), **body}
    return 200, body
