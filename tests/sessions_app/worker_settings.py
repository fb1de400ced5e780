"""Settings for the real-worker reaper test: fast heartbeats and a summarizer that hangs once."""

from __future__ import annotations

from ctxweb.settings import *  # noqa: F403

CTXWEB_SUMMARIZER_CLASS = "tests.sessions_app.reaper_scenario.HangOnceSummarizer"
CTXWEB_JOB_HEARTBEAT_SECONDS = 0.2
# Long enough that a heartbeat delayed by a loaded machine is never taken for a lost worker
# (the test backdates the heartbeat itself to make the job stale).
CTXWEB_JOB_STALE_SECONDS = 30.0
CTXWEB_REAPER_INTERVAL_SECONDS = 0.5
