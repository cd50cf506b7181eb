# The history's totals (services/job_history.history_totals) sum every ended job's day rollups:
# this partial index holds the day rows' job and allocated GPU-seconds alone, in job order, so
# that sum reads a few MB of index instead of the day rows scattered over the whole table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0023_job_singleton'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='usagerollup',
            index=models.Index(condition=models.Q(('bucket', 86400)), fields=['job'], include=('allocated_gpu_seconds',),
                               name='usage_rollup_day_job'),
        ),
    ]
