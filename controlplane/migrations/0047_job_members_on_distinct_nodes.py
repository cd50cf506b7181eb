"""A job may ask that no two members of its gang share a node (Slurm's --ntasks-per-node=1, a
Kubernetes pod anti-affinity): Job.members_on_distinct_nodes, false for every job so far, whose
members stay packed as before. One column with a default: no rows rewritten by hand.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0046_api_token_verbose_name'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='members_on_distinct_nodes',
            field=models.BooleanField(db_default=False, default=False, help_text="No two members of the gang on one node (Slurm's --ntasks-per-node=1); otherwise members are packed, two on a node with room for both."),
        ),
    ]
