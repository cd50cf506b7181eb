"""Database triggers that refuse a generation or an epoch going backwards.

A check constraint cannot compare a row's old and new values, so these rules are triggers. They
are the storage's own guarantee behind fencing: no code path, buggy or stale, can lower them.
"""

from __future__ import annotations

from django.db import migrations

_PG = """
CREATE OR REPLACE FUNCTION qm_refuse_generation_backwards() RETURNS trigger AS $$
BEGIN
  IF NEW.generation < OLD.generation THEN
    RAISE EXCEPTION 'allocation % generation may not go backwards (% -> %)', OLD.id, OLD.generation, NEW.generation
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION qm_refuse_epoch_backwards() RETURNS trigger AS $$
BEGIN
  IF NEW.epoch < OLD.epoch THEN
    RAISE EXCEPTION 'scheduler lease epoch may not go backwards (% -> %)', OLD.epoch, NEW.epoch
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER allocation_generation_monotonic BEFORE UPDATE ON controlplane_allocation
  FOR EACH ROW EXECUTE FUNCTION qm_refuse_generation_backwards();
CREATE TRIGGER scheduler_epoch_monotonic BEFORE UPDATE ON controlplane_schedulerlease
  FOR EACH ROW EXECUTE FUNCTION qm_refuse_epoch_backwards();
"""
_PG_DROP = """
DROP TRIGGER IF EXISTS allocation_generation_monotonic ON controlplane_allocation;
DROP TRIGGER IF EXISTS scheduler_epoch_monotonic ON controlplane_schedulerlease;
DROP FUNCTION IF EXISTS qm_refuse_generation_backwards();
DROP FUNCTION IF EXISTS qm_refuse_epoch_backwards();
"""
_SQLITE = [
    """CREATE TRIGGER allocation_generation_monotonic BEFORE UPDATE OF generation ON controlplane_allocation
       WHEN NEW.generation < OLD.generation
       BEGIN SELECT RAISE(ABORT, 'allocation generation may not go backwards'); END;""",
    """CREATE TRIGGER scheduler_epoch_monotonic BEFORE UPDATE OF epoch ON controlplane_schedulerlease
       WHEN NEW.epoch < OLD.epoch
       BEGIN SELECT RAISE(ABORT, 'scheduler lease epoch may not go backwards'); END;""",
]
_SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS allocation_generation_monotonic;",
    "DROP TRIGGER IF EXISTS scheduler_epoch_monotonic;",
]


def _create(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(_PG, params=None)
    elif vendor == "sqlite":
        for statement in _SQLITE:
            schema_editor.execute(statement, params=None)


def _drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    statements = [_PG_DROP] if vendor == "postgresql" else _SQLITE_DROP if vendor == "sqlite" else []
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("controlplane", "0001_initial")]
    operations = [migrations.RunPython(_create, _drop)]
