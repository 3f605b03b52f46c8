"""Import jobs keep their uploaded file as pieces of at most 1 MiB (JobChunk), written and read one at a time."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("judging", "0016_django_sessions"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobChunk",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("seq", models.PositiveIntegerField(verbose_name="position in the file")),
                ("data", models.BinaryField(verbose_name="bytes of the file")),
                (
                    "job",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="chunks", to="judging.job"
                    ),
                ),
            ],
            options={
                "verbose_name": "piece of an uploaded file",
                "verbose_name_plural": "pieces of uploaded files",
                "constraints": [models.UniqueConstraint(fields=("job", "seq"), name="jobchunk_job_seq_unique")],
            },
        ),
    ]
