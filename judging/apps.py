"""App configuration."""

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "judging"
    verbose_name = "Relevance judging"

    def ready(self) -> None:
        # Imported here, not at the top: the models (and the modules that use them) load only once Django's app
        # registry is ready, which is what ready() is for.
        from django.core.signals import request_finished
        from django.db.models.signals import post_delete

        # Connects the login hook that puts a person's saved language into their session.
        from judging import languages  # noqa: F401
        from judging.models import Campaign
        from judging.scoring.cube_file import campaign_deleted
        from judging.scoring.memory import request_finished_trim

        # A deleted campaign's shared run-cube files go with it.
        post_delete.connect(campaign_deleted, sender=Campaign, dispatch_uid="cube_files_remove")
        # Memory the scores' temporaries freed goes back to the system once a request is done.
        request_finished.connect(request_finished_trim, dispatch_uid="malloc_trim")
