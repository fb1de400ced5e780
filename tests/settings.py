"""Settings for the test suite: ctxweb's own, with a throwaway data directory.

pytest-django loads settings before any conftest runs, so the data directory must be
chosen here, before `ctxweb.settings` reads CTXWEB_DATA_DIR.
"""

import os
import tempfile

os.environ.setdefault("CTXWEB_DATA_DIR", tempfile.mkdtemp(prefix="ctxweb-test-"))

from ctxweb.settings import *  # noqa: F403
