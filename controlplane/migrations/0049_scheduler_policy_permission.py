"""The admin's "Scheduler policy" page gets a permission of its own, "Can view the scheduler
policy" (controlplane.view_scheduler_policy); until now it was shown to whoever could view the
scheduler lease. The groups and users given "Can view scheduler lease" before this migration are
given the new permission too, so nobody who read the policy page loses it on upgrade; from then
on the two are granted apart."""

from django.db import migrations


def give_policy_to_lease_viewers(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    User = apps.get_model("auth", "User")
    lease_type, _ = ContentType.objects.get_or_create(app_label="controlplane", model="schedulerlease")
    # post_migrate makes permissions after every migration has run: this one is needed now.
    policy, _ = Permission.objects.get_or_create(content_type=lease_type, codename="view_scheduler_policy",
                                                 defaults={"name": "Can view the scheduler policy"})
    lease = Permission.objects.filter(content_type=lease_type, codename="view_schedulerlease").first()
    if lease is None:  # a new database: nobody holds it yet
        return
    for group in Group.objects.filter(permissions=lease):
        group.permissions.add(policy)
    for user in User.objects.filter(user_permissions=lease):
        user.user_permissions.add(policy)


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('controlplane', '0048_job_borrowing_event'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='schedulerlease',
            options={'permissions': [('view_scheduler_policy', 'Can view the scheduler policy')]},
        ),
        migrations.RunPython(give_policy_to_lease_viewers, migrations.RunPython.noop),
    ]
