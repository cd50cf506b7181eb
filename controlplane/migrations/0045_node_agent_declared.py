"""What a node's agent declared at its last registration, kept on the node (services/nodes.py
guards an admin's edit of its GPU type and count with it), filled from each node's latest
`node.registered` event:

- its GPU count and when: every registration's data has `gpus`;
- its GPU type: the data's `gpu_type_declared` (registrations since 6 Dec); before that the
  event kept no declared type, except where it says it anyway: the registration that created
  the node, whose agent had to name a type (a first registration without one is refused), its
  line exactly "<node> registered <n>× <type>", the type one the fleet knows. Any other
  registration before 6 Dec (an agent registering a node an admin had described, or again)
  may have named none: no type is on record ("") and the node's type stays the admin's to
  change until its agent next registers (a restart), which records what it names.

No table rewrite (three nullable or defaulted columns); one query a thousand nodes.
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery

BATCH = 1000


def declared_type(node_name, data, reason, message, known_types):
    named = data.get("gpu_type_declared")
    if isinstance(named, str):
        return named
    prefix = f"{node_name} registered {data.get('gpus')}× "
    if reason == "Registered" and message.startswith(prefix) and message[len(prefix):] in known_types:
        return message[len(prefix):]
    return ""


def fill_from_registrations(apps, schema_editor):
    Node = apps.get_model("controlplane", "Node")
    Event = apps.get_model("controlplane", "Event")
    GpuType = apps.get_model("controlplane", "GpuType")
    known_types = set(GpuType.objects.values_list("name", flat=True))
    latest = Event.objects.filter(kind="node.registered", node_id=OuterRef("pk")).order_by("-id").values("id")[:1]
    last = list(Node.objects.annotate(last=Subquery(latest)).filter(last__isnull=False)
                .order_by("pk").values_list("pk", "name", "last"))
    for start in range(0, len(last), BATCH):
        chunk = last[start:start + BATCH]
        events = {pk: row for pk, *row in Event.objects.filter(pk__in=[e for _, _, e in chunk])
                  .values_list("pk", "data", "reason", "message", "created_at")}
        changed = []
        for pk, name, event_id in chunk:
            data, reason, message, at = events[event_id]
            data = data if isinstance(data, dict) else {}
            gpus = data.get("gpus")
            changed.append(Node(
                pk=pk, agent_registered_at=at,
                agent_gpu_count=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 else None,
                agent_gpu_type=declared_type(name, data, reason, message or "", known_types)))
        Node.objects.bulk_update(changed, ["agent_registered_at", "agent_gpu_count", "agent_gpu_type"])


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0044_pending_place_position_none_for_dependency_waits'),
    ]

    operations = [
        migrations.AddField(
            model_name='node',
            name='agent_gpu_count',
            field=models.PositiveIntegerField(blank=True, null=True, verbose_name='GPUs its agent declared'),
        ),
        migrations.AddField(
            model_name='node',
            name='agent_gpu_type',
            field=models.CharField(blank=True, db_default='', default='', max_length=64, verbose_name='GPU type its agent declared'),
        ),
        migrations.AddField(
            model_name='node',
            name='agent_registered_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name="its agent's last registration"),
        ),
        migrations.RunPython(fill_from_registrations, migrations.RunPython.noop),
    ]
