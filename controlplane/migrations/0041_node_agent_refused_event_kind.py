# Event kind node.agent_refused: a heartbeat or report of a node's agent the control plane refused (400).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0040_api_tokens_hashed'),
    ]

    operations = [
        migrations.AlterField(
            model_name='event',
            name='kind',
            field=models.CharField(choices=[('job.submitted', 'Job submitted'), ('job.pending', 'Job waiting'), ('job.bound', 'Job bound'), ('job.started', 'Job started'), ('job.preempting', 'Job preemption signalled'), ('job.stopping', 'Job stop signalled'), ('job.preempted', 'Job preempted and requeued'), ('job.resized', 'Job resized'), ('job.finished', 'Job finished'), ('job.cancelled', 'Job cancelled'), ('job.timed_out', 'Job hit its runtime limit'), ('job.requeued', 'Job requeued'), ('job.unschedulable', 'Job can never run'), ('job.held', 'Job held'), ('job.released', 'Job released'), ('job.updated', 'Job changed while waiting'), ('allocation.released', 'Allocation released'), ('allocation.fenced', 'Allocation fenced'), ('node.registered', 'Node registered'), ('node.state', 'Node state changed'), ('node.agent_refused', 'Agent contact refused'), ('quota.changed', 'Quota changed'), ('cohort.changed', 'Cohort changed'), ('config.changed', 'Configuration changed'), ('leader.elected', 'Scheduler leader elected')], max_length=32),
        ),
    ]
