"""Job.array_task_limit: a job array's task limit (Slurm's `--array=0-99%10`), the same on every
task of the array; null (every existing job) for none. A nullable column without a default:
PostgreSQL adds it without rewriting the table. After 0025 (dependency mode), the latest before it."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0025_job_dependency_mode"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="array_task_limit",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
