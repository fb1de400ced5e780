from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    """Stored agent sessions, their compactions, the REST API and the pages."""

    name = "sessions_app"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"
