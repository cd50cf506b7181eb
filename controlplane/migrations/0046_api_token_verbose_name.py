"""An API token is called one ("API token", where Django said "Api token") on the admin's pages:
a user's delete confirmation lists each of their tokens as "API token: token 12 of dora, issued
2026-12-01 09:00 UTC". Options only: no SQL.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0045_node_agent_declared'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='apitoken',
            options={'ordering': ['id'], 'verbose_name': 'API token', 'verbose_name_plural': 'API tokens'},
        ),
    ]
