"""App configuration."""

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "judging"
    verbose_name = "Relevance judging"

    def ready(self):
        # Connects the login hook that puts a person's saved language into their session.
        from judging import languages  # noqa: F401
