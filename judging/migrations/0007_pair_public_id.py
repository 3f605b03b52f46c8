"""Pairs get a random public id (issue 11 #6): row ids follow run-import order and revealed the systems."""

import secrets

from django.db import migrations, models

import judging.models

# Fixed here rather than imported: a migration must keep doing what it did when it was written.
PUBLIC_ID_MIN = 2**40
PUBLIC_ID_MAX = 2**53


def fill_public_ids(apps, schema_editor):
    Pair = apps.get_model("judging", "Pair")
    taken: set[int] = set()
    updates = []
    for pk in Pair.objects.order_by().values_list("id", flat=True).iterator(chunk_size=20000):
        value = PUBLIC_ID_MIN + secrets.randbelow(PUBLIC_ID_MAX - PUBLIC_ID_MIN)
        while value in taken:
            value = PUBLIC_ID_MIN + secrets.randbelow(PUBLIC_ID_MAX - PUBLIC_ID_MIN)
        taken.add(value)
        updates.append(Pair(id=pk, public_id=value))
    Pair.objects.bulk_update(updates, ["public_id"], batch_size=2000)


class Migration(migrations.Migration):
    dependencies = [
        ("judging", "0006_job"),
    ]

    operations = [
        migrations.AddField(
            model_name="pair",
            name="public_id",
            field=models.BigIntegerField(null=True, editable=False, verbose_name="public id"),
        ),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="pair",
            name="public_id",
            field=models.BigIntegerField(
                default=judging.models.pair_public_id,
                editable=False,
                unique=True,
                help_text="Random: what annotators, URLs and the API call the pair (the row id would reveal import order).",
                verbose_name="public id",
            ),
        ),
    ]
