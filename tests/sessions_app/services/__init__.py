"""Tests of sessions_app/services, one module per service."""
