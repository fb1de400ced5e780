"""`manage.py check --deploy --fail-level WARNING` passes with production settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import manage, production_env, subprocess_env

pytestmark = pytest.mark.slow


def test_deploy_check_passes_with_production_environment(tmp_path: Path) -> None:
    env = production_env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")

    completed = manage(env, "check", "--deploy", "--fail-level", "WARNING")

    assert "no issues" in completed.stdout


def test_deploy_check_fails_with_development_settings(tmp_path: Path) -> None:
    # The same command must fail where it should: DEBUG on is a deployment warning.
    env = subprocess_env(tmp_path, DJANGO_DEBUG="1")

    completed = manage(env, "check", "--deploy", "--fail-level", "WARNING", check=False)

    assert completed.returncode != 0
    assert "security.W018" in completed.stderr + completed.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path, DJANGO_DEBUG="0")

    completed = manage(env, "check", check=False)

    assert completed.returncode != 0
    assert "DJANGO_SECRET_KEY" in completed.stderr


def test_storage_options_must_be_a_json_object(tmp_path: Path) -> None:
    env = subprocess_env(
        tmp_path,
        CTXWEB_STORAGE_BACKEND="django.core.files.storage.FileSystemStorage",
        CTXWEB_STORAGE_OPTIONS="[1, 2]",
    )

    completed = manage(env, "check", check=False)

    assert completed.returncode != 0
    assert "CTXWEB_STORAGE_OPTIONS must be a JSON object" in completed.stderr
