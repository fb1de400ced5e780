from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    """Stored agent sessions, their compactions, the REST API and the pages."""

    name = "sessions_app"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        import compaction

        # The engine reads no settings: it is told where the tiktoken vocabularies live.
        compaction.configure(tiktoken_dir=settings.CTXWEB_TIKTOKEN_DIR or None)
