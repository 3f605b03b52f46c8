from django.db import migrations, models


def descriptions_per_campaign(apps, schema_editor):
    """Each model judge's membership gets the judge's description, with every endpoint URL in it written
    without credentials (a query-string key was stored in it); the global description is cleaned too."""
    from judging.endpoints import urls_display

    AnnotatorProfile = apps.get_model("judging", "AnnotatorProfile")
    Membership = apps.get_model("judging", "Membership")
    for profile in AnnotatorProfile.objects.filter(kind="model").exclude(description=""):
        shown = urls_display(profile.description)
        if shown != profile.description:
            profile.description = shown
            profile.save(update_fields=["description"])
        Membership.objects.filter(user_id=profile.user_id).update(description=shown)


class Migration(migrations.Migration):
    dependencies = [
        ("judging", "0014_usersession"),
    ]

    operations = [
        migrations.AddField(
            model_name="membership",
            name="description",
            field=models.TextField(
                blank=True,
                help_text="For a model judge: which model and prompt produced its labels here.",
                verbose_name="description",
            ),
        ),
        migrations.RunPython(descriptions_per_campaign, migrations.RunPython.noop),
    ]
