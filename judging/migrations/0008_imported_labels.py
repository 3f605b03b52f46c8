"""Imported labels never pass for a person's own judgments (issue 11 #4): revisions name the importing lead
and the source they were imported for, and sources that are not people get a non-login account."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("judging", "0007_pair_public_id"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="judgmentrevision",
            name="changed_by",
            field=models.ForeignKey(
                blank=True,
                help_text="Who made the change; empty for labels imported from the command line.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="judgmentrevision",
            name="on_behalf_of",
            field=models.ForeignKey(
                blank=True,
                help_text="Imported labels: the source (annotator or source account) they are recorded for.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="imported on behalf of",
            ),
        ),
        migrations.AddField(
            model_name="judgmentrevision",
            name="imported_from",
            field=models.CharField(blank=True, max_length=255, verbose_name="imported from"),
        ),
        migrations.CreateModel(
            name="LabelSource",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField(auto_now_add=True, verbose_name="created")),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="label_source",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "label source",
                "verbose_name_plural": "label sources",
                "ordering": ["user"],
            },
        ),
    ]
