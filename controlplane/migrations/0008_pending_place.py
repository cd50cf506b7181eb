"""A waiting job's volatile facts (queue position, ETA, the numbers of its reason) move from the
wide jobs row to the narrow PendingPlace, so a cycle rewrites a jobs row only when the reason's
words change. The sentences stay on the job with their numbers marked (`pending_words`,
`would_start_if_words`); sentences stored before this migration hold no marks and read as they are.
"""

import django.db.models.deletion
from django.db import migrations, models


def move_places(apps, schema_editor):  # type: ignore[no-untyped-def]
    Job = apps.get_model("controlplane", "Job")
    PendingPlace = apps.get_model("controlplane", "PendingPlace")
    rows = Job.objects.filter(queue_position__isnull=False).values_list("pk", "queue_position", "eta")
    PendingPlace.objects.bulk_create(
        [PendingPlace(job_id=pk, queue_position=position, eta=eta, numbers="") for pk, position, eta in rows.iterator()],
        batch_size=2000,
    )


def restore_places(apps, schema_editor):  # type: ignore[no-untyped-def]
    Job = apps.get_model("controlplane", "Job")
    PendingPlace = apps.get_model("controlplane", "PendingPlace")
    for place in PendingPlace.objects.all().iterator():
        Job.objects.filter(pk=place.job_id).update(queue_position=place.queue_position, eta=place.eta)


def roomy_pages(apps, schema_editor):  # type: ignore[no-untyped-def]
    # Every cycle rewrites most rows in place: room on each page keeps those updates HOT.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE controlplane_pendingplace SET (fillfactor = 50)")


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0007_quota_rollup_parts_within_tolerance"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingPlace",
            fields=[
                ("job", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                             related_name="place", serialize=False, to="controlplane.job")),
                ("queue_position", models.PositiveIntegerField()),
                ("eta", models.DateTimeField(blank=True, null=True)),
                ("numbers", models.TextField(blank=True)),
            ],
        ),
        migrations.RunPython(roomy_pages, migrations.RunPython.noop),
        migrations.RunPython(move_places, restore_places),
        migrations.RenameField(model_name="job", old_name="pending_message", new_name="pending_words"),
        migrations.RenameField(model_name="job", old_name="pending_would_start_if", new_name="would_start_if_words"),
        migrations.RemoveField(model_name="job", name="queue_position"),
        migrations.RemoveField(model_name="job", name="eta"),
    ]
