"""Jobs' output as their agents ship it (JobLogChunk): per run (allocation generation), rank and
byte offset, unique on those three so a resent chunk is dropped. Deleted with the job. No data
step: output from before this migration stayed on the nodes (<workdir>/rank<N>.log).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0019_node_activity_rollup'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobLogChunk',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('generation', models.BigIntegerField(help_text='The allocation generation (one run of the job).')),
                ('node_name', models.CharField(max_length=128)),
                ('rank', models.PositiveIntegerField(help_text="The process's RANK (NODE_RANK for a per-node launch).")),
                ('offset', models.BigIntegerField(help_text="Byte offset of this chunk in the rank's output.")),
                ('nbytes', models.PositiveIntegerField(help_text='Bytes of output this chunk covers (before decoding).')),
                ('text', models.TextField()),
                ('received_at', models.DateTimeField()),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='log_chunks', to='controlplane.job')),
            ],
            options={
                'ordering': ['generation', 'rank', 'offset'],
                'indexes': [models.Index(fields=['job', 'generation'], name='job_log_job_generation')],
                'constraints': [models.UniqueConstraint(fields=('generation', 'rank', 'offset'), name='job_log_chunk_once'), models.CheckConstraint(condition=models.Q(('offset__gte', 0), ('nbytes__gt', 0)), name='job_log_chunk_bytes')],
            },
        ),
    ]
