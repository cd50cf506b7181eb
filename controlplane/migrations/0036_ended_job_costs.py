# The history's total cost (services/job_costs.jobs_total_cost) prices every job of the filtered
# set from its allocations' GPU rows and the price rates. At 50,000 ended jobs that statement joins
# and groups ~400,000 GPU rows: ~0.8 s, most of the /history/ page's time. Yet an ended job whose
# runs are all released costs the same on every read, until a price rate or a node's GPU type or
# capacity tier changes, or someone requeues it. So (PostgreSQL only):
#
# controlplane_ended_job_cost: a settled job's cost in cents, as jobs_total_cost would price it,
# written by `qm.accounting.remember_job_costs` (services/job_costs.remember_ended_job_costs) and
# stamped with what it was priced under:
#   - `requeues`: the job's requeue_count then. A requeue (which any new run of an ended job needs)
#     raises it, so the row no longer matches the job and is read as absent;
#   - `prices`: controlplane_price_generation's number then, which statement triggers raise in the
#     transaction of every write to the price rates and of every change of a node's GPU type or
#     capacity tier (what the statement joins prices by);
#   - `settled_at`: its last release; a read for an earlier `now` prices the job itself.
# A row is used only where all three still hold, so a row written from a snapshot older than a
# concurrent change is never read as current. A job's deletion deletes its row; a TRUNCATE of the
# jobs (a test database's flush) empties the table.
#
# SQLite (the demo) gets nothing: jobs_total_cost prices every job there.

from django.db import migrations

COSTS = "controlplane_ended_job_cost"
PRICES = "controlplane_price_generation"

CREATE = [
    f"""CREATE TABLE {COSTS} (job_id bigint PRIMARY KEY, cents bigint NOT NULL, requeues integer NOT NULL,
        prices bigint NOT NULL, settled_at timestamptz NOT NULL)""",
    f"COMMENT ON TABLE {COSTS} IS 'Each settled ended job''s cost in cents, stamped with its requeue count and "
    f"the price generation it was priced under (migration 0036; services/job_costs.py)'",
    f"CREATE TABLE {PRICES} (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), generation bigint NOT NULL)",
    f"INSERT INTO {PRICES} (generation) VALUES (1)",
    f"""CREATE FUNCTION {PRICES}_raise() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {PRICES} SET generation = generation + 1;
        RETURN NULL;
    END $$""",
    f"CREATE TRIGGER {PRICES}_rates AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON controlplane_pricerate "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {PRICES}_raise()",
    # row-level with a WHEN: a node's heartbeats and leases update it all the time, its type and tier hardly ever
    f"CREATE TRIGGER {PRICES}_nodes AFTER UPDATE ON controlplane_node FOR EACH ROW "
    f"WHEN (OLD.gpu_type_id IS DISTINCT FROM NEW.gpu_type_id OR OLD.capacity_tier IS DISTINCT FROM NEW.capacity_tier) "
    f"EXECUTE FUNCTION {PRICES}_raise()",
    f"""CREATE FUNCTION {COSTS}_forget() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM {COSTS} WHERE job_id IN (SELECT id FROM old_jobs);
        RETURN NULL;
    END $$""",
    f"CREATE TRIGGER {COSTS}_jobs_deleted AFTER DELETE ON controlplane_job REFERENCING OLD TABLE AS old_jobs "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {COSTS}_forget()",
    f"""CREATE FUNCTION {COSTS}_empty() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE {COSTS};
        RETURN NULL;
    END $$""",
    f"CREATE TRIGGER {COSTS}_jobs_truncated AFTER TRUNCATE ON controlplane_job "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {COSTS}_empty()",
]
DROP = [
    f"DROP TRIGGER IF EXISTS {COSTS}_jobs_truncated ON controlplane_job",
    f"DROP TRIGGER IF EXISTS {COSTS}_jobs_deleted ON controlplane_job",
    f"DROP TRIGGER IF EXISTS {PRICES}_nodes ON controlplane_node",
    f"DROP TRIGGER IF EXISTS {PRICES}_rates ON controlplane_pricerate",
    f"DROP FUNCTION IF EXISTS {COSTS}_empty()",
    f"DROP FUNCTION IF EXISTS {COSTS}_forget()",
    f"DROP FUNCTION IF EXISTS {PRICES}_raise()",
    f"DROP TABLE IF EXISTS {PRICES}",
    f"DROP TABLE IF EXISTS {COSTS}",
]


def _run(statements: list[str]):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('controlplane', '0035_exit_codes_of_signal_deaths'),
    ]

    operations = [
        migrations.RunPython(_run(CREATE), _run(DROP), elidable=False),
    ]
