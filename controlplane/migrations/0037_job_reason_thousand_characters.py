"""A waiting job's reason in 1,000 characters (an Event's message holds as many), not 500: the
engine's longest sentence (over quota, holding a reservation, protected candidates to preempt
and when that lifts, the ETA's own clause) runs to some 750 with its numbers, and was cut before
that clause. On PostgreSQL a wider varchar changes the catalogue only: no row is rewritten."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0036_ended_job_costs"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="pending_words",
            field=models.CharField(blank=True, max_length=1000),
        ),
    ]
