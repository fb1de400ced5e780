"""Suite-wide fixtures. Settings come from tests/settings.py (a throwaway data directory)."""

pytest_plugins = ["tests.support.fixtures"]
