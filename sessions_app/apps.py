from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.management import call_command
from django.db.models.signals import post_migrate


class SessionsAppConfig(AppConfig):
    """Stored agent sessions, their compactions, the REST API and the pages."""

    name = "sessions_app"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import compaction

        # The engine reads no settings: it is told where the tiktoken vocabularies live and
        # whether to count with bpe-openai's counter.
        compaction.configure(
            tiktoken_dir=settings.CTXWEB_TIKTOKEN_DIR or None,
            fast_counting=settings.CTXWEB_FAST_TOKEN_COUNTING,
        )
        post_migrate.connect(create_cache_table, sender=self)


def create_cache_table(using: str = "default", **kwargs: Any) -> None:
    """After `migrate`: the database cache's table (production's shared cache), if missing.

    Made on every database, whatever CACHES says now, so switching to the database cache
    (the default with DEBUG off, ctxweb/settings.py) needs no extra step; `createcachetable`
    adds the tables of any other database caches configured.
    """
    table = str(getattr(settings, "CTXWEB_CACHE_TABLE", "ctxweb_cache"))
    call_command("createcachetable", table, database=using, verbosity=0)
    call_command("createcachetable", database=using, verbosity=0)
