"""User API tokens stored as the SHA-256 of their keys (controlplane.ApiToken), in place of DRF's
authtoken table, which held every key in clear.

Every token issued before keeps working: its key's digest is written here, and a request with
the key is looked up by that digest (api/authentication.py). The clear table is then dropped,
with what Django recorded of the authtoken app (its applied migrations, its content types and
their permissions), since the app is no longer installed. Going back loses the tokens (their
keys are nowhere any more): their users sign in again.
"""

import hashlib
from datetime import UTC, datetime

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.migrations.recorder import MigrationRecorder
from django.utils.dateparse import parse_datetime

#: DRF authtoken's table: key (40 hex digits), created, user_id.
CLEAR_TABLE = "authtoken_token"


def _aware(value: object) -> datetime:
    """The `created` a raw cursor gave (PostgreSQL: a datetime; SQLite: its text, in UTC)."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if not isinstance(moment, datetime):
        return datetime.now(UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def hash_clear_tokens(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Each key in DRF's table becomes an ApiToken holding its SHA-256 (the same digest
    services/token_digests.digest makes, written out here so this migration never changes),
    for the same user, with the same `created`; then the table goes."""
    connection = schema_editor.connection
    if CLEAR_TABLE not in connection.introspection.table_names():
        return  # a database made after authtoken left INSTALLED_APPS: nothing was ever stored in clear
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {quote('key')}, {quote('user_id')}, {quote('created')} FROM {quote(CLEAR_TABLE)}")
        rows = cursor.fetchall()
    api_token = apps.get_model("controlplane", "ApiToken")
    api_token.objects.using(connection.alias).bulk_create(
        api_token(digest=hashlib.sha256(str(key).encode("utf-8")).hexdigest(), user_id=user_id, created=_aware(created))
        for key, user_id, created in rows
    )
    schema_editor.execute(f"DROP TABLE {quote(CLEAR_TABLE)}")
    MigrationRecorder(connection).migration_qs.filter(app="authtoken").delete()
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.using(connection.alias).filter(app_label="authtoken").delete()  # their permissions with them


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0039_team_priority_classes'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(editable=False, max_length=64, unique=True)),
                ('created', models.DateTimeField()),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(fields=['user', 'created'], name='api_token_user_created')],
            },
        ),
        migrations.RunPython(hash_clear_tokens, migrations.RunPython.noop),
    ]
