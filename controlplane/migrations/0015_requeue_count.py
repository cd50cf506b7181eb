"""Preemption budget counts preemptions only; every requeue is counted apart.

Before, a job stopped to resize or fenced off a failed node was counted as preempted:
`preemption_count` and `last_preempted_at` moved for every requeue, and a job whose node failed
three times was protected from preemption for its class's budget window. The new
`requeue_count` takes over "every requeue" (filled from the old count), and the preemption
count and time are recounted from the jobs' `job.preempted` events.
"""

from django.db import migrations, models
from django.db.models import Count, Max


def recount(apps, schema_editor):
    Job = apps.get_model("controlplane", "Job")
    Event = apps.get_model("controlplane", "Event")
    Job.objects.filter(preemption_count__gt=0).update(requeue_count=models.F("preemption_count"))
    preempted = {
        row["job_id"]: (row["n"], row["last"])
        for row in Event.objects.filter(kind="job.preempted", job_id__isnull=False)
        .values("job_id").annotate(n=Count("id"), last=Max("created_at"))
    }
    changed = []
    for job in Job.objects.filter(requeue_count__gt=0).only("pk", "preemption_count", "last_preempted_at"):
        count, last = preempted.get(job.pk, (0, None))
        if (job.preemption_count, job.last_preempted_at) != (count, last):
            job.preemption_count, job.last_preempted_at = count, last
            changed.append(job)
    Job.objects.bulk_update(changed, ["preemption_count", "last_preempted_at"], batch_size=1000)


def uncount(apps, schema_editor):
    Job = apps.get_model("controlplane", "Job")
    Event = apps.get_model("controlplane", "Event")
    last_requeue = dict(
        Event.objects.filter(kind__in=("job.preempted", "job.resized", "job.requeued"), job_id__isnull=False)
        .values("job_id").annotate(last=Max("created_at")).values_list("job_id", "last")
    )
    changed = []
    for job in Job.objects.filter(requeue_count__gt=0).only("pk", "requeue_count", "last_preempted_at"):
        job.preemption_count = job.requeue_count
        job.last_preempted_at = last_requeue.get(job.pk, job.last_preempted_at)
        changed.append(job)
    Job.objects.bulk_update(changed, ["preemption_count", "last_preempted_at"], batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0014_token_cost_columns"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="requeue_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(recount, uncount),
    ]
