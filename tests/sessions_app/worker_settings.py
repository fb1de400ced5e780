"""Settings for the real-worker reaper test: fast heartbeats and a summarizer that hangs once."""

from __future__ import annotations

from ctxweb.settings import *  # noqa: F403

CTXWEB_SUMMARIZER_CLASS = "tests.sessions_app.reaper_scenario.HangOnceSummarizer"
CTXWEB_JOB_HEARTBEAT_SECONDS = 0.2
CTXWEB_JOB_STALE_SECONDS = 1.0
CTXWEB_REAPER_INTERVAL_SECONDS = 0.5
