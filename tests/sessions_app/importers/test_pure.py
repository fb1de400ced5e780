"""The importers and exporters are plain Python: importing them loads no Django."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.sessions_app.samples import REPO


def test_importers_and_exporters_do_not_import_django() -> None:
    code = (
        "import sys, sessions_app.importers, sessions_app.exporters; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, env=env
    )
    assert done.stdout.strip() == "[]"
