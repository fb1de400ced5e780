"""The web app tells the engine where the tiktoken vocabularies live and how to count."""

from __future__ import annotations

from pathlib import Path

from django.apps import apps
from django.test import override_settings

from compaction import tokens


def test_ready_passes_the_vocabulary_folder_setting_to_the_engine(tmp_path: Path) -> None:
    config = apps.get_app_config("sessions_app")
    try:
        with override_settings(CTXWEB_TIKTOKEN_DIR=str(tmp_path)):
            config.ready()
            assert tokens._vocabulary_cache_dir() == tmp_path
        with override_settings(CTXWEB_TIKTOKEN_DIR=""):
            config.ready()
            assert tokens._vocabulary_cache_dir().name == "ctxweb-tiktoken"
    finally:
        config.ready()


def test_ready_passes_the_fast_counting_setting_to_the_engine() -> None:
    config = apps.get_app_config("sessions_app")
    try:
        with override_settings(CTXWEB_FAST_TOKEN_COUNTING=False):
            config.ready()
            assert tokens._fast_counting is False
        with override_settings(CTXWEB_FAST_TOKEN_COUNTING=True):
            config.ready()
            assert tokens._fast_counting is True
    finally:
        config.ready()
