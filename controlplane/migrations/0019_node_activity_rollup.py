"""Each node's reported activity per allocation and UTC hour (NodeActivityRollup), folded in by
the accounting run from the samples above `AccountingCursor.last_node_sample_id`.

The node page's tiers over a week read every sample of the week before: 483,840 on a busy node,
283-500 ms. With whole hours read here they read a thousand rows and the partial first and last
hours' samples. No data step: the cursor's new id starts at 0, so the first accounting run after
the migration folds the samples kept so far (a million ids per run), and until it has, the page
reads the samples above it itself.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0018_holds_dependencies_retired_nodes'),
    ]

    operations = [
        migrations.AddField(
            model_name='accountingcursor',
            name='last_node_sample_id',
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='accountingcursor',
            name='longest_node_sample_s',
            field=models.FloatField(default=0.0),
        ),
        migrations.CreateModel(
            name='NodeActivityRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField(help_text="The UTC hour's start.")),
                ('active_gpu_seconds', models.FloatField(default=0.0, help_text='Σ GPUs × seconds × activity of its samples.')),
                ('allocation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='node_activity_rollups', to='controlplane.allocation')),
                ('node', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='activity_rollups', to='controlplane.node')),
            ],
            options={
                'ordering': ['node_id', 'start', 'allocation_id'],
                'constraints': [models.UniqueConstraint(fields=('node', 'start', 'allocation'), name='node_activity_rollup_unique_cell')],
            },
        ),
    ]
