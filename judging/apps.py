"""App configuration."""

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "judging"
    verbose_name = "Relevance judging"

    def ready(self):
        from django.db.models.signals import post_delete

        # Connects the login hook that puts a person's saved language into their session.
        from judging import languages  # noqa: F401
        from judging.models import Campaign
        from judging.scoring.cube_file import campaign_deleted

        # A deleted campaign's shared run-cube files go with it.
        post_delete.connect(campaign_deleted, sender=Campaign, dispatch_uid="cube_files_remove")
