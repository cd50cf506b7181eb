"""Job.dependency_mode: how a job's dependencies combine, all of them met (Slurm's `,`, every job
so far) or any one of them (`?`). A column with a constant default: PostgreSQL 11+ adds it
without rewriting the table; a partial index of the waiting any-of jobs. After 0026 (maintenance windows, written beside it; 0027 comes
after this one) so the graph keeps one line."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0026_maintenance_windows"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="dependency_mode",
            field=models.CharField(choices=[("all", "every one met"), ("any", "any one of them met")], default="all",
                                   max_length=3),
        ),
        # The waiting any-of jobs (few: an empty index for a fleet that uses none), read by the
        # snapshot's dependency read each cycle.
        migrations.AddIndex(
            model_name="job",
            index=models.Index(condition=models.Q(("dependency_mode", "any"), ("state", "pending")), fields=["id"],
                               name="job_any_of_waiting"),
        ),
    ]
