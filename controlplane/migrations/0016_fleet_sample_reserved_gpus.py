"""Each cycle's sample keeps the idle GPUs held for a waiting job's reservation or nomination.

The engine counted them every cycle (`FleetFigures.reserved_gpus`) but nothing stored them, so
an operator could not tell GPUs idle because of fragmentation from GPUs idle because the head
job's nodes were draining. Samples taken before this migration read 0: the figure was not kept.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0015_requeue_count"),
    ]

    operations = [
        migrations.AddField(
            model_name="fleetsample",
            name="reserved_gpus",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
