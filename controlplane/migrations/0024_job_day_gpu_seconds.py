# The history's totals (services/job_history.history_totals) add up every ended job's allocated
# GPU-hours, each the sum of its day rollups, rounded. At 100,000 jobs, grouping the day rows per
# job took most of the page's time (they lie scattered among the minute and hour rows), so:
#
# controlplane_job_day_gpu_seconds (PostgreSQL only): each job's day rollups' allocated
# GPU-seconds, summed, kept by statement triggers on the rollup table. Every INSERT, UPDATE or
# DELETE of day rows (the accounting's runs, recomputations and repairs, a job's deletion, a COPY)
# adds its difference per job in the same transaction; a TRUNCATE empties it. Differences commute,
# so concurrent writers lose none (each job's row is locked by its upsert, in job order). A job
# whose day rows never held a GPU-second has no row (read as 0). The totals read one row per job
# instead of grouping the rollups. The rows there now are summed once, here.
#
# SQLite (the demo) gets nothing: the history sums the rollups there.

from django.db import migrations

SUMS = "controlplane_job_day_gpu_seconds"
_UPSERT = f"""
        INSERT INTO {SUMS} AS t (job_id, allocated_gpu_seconds)
        SELECT job_id, SUM(seconds) FROM ({{rows}}) AS difference
        GROUP BY job_id HAVING SUM(seconds) <> 0 ORDER BY job_id
        ON CONFLICT (job_id) DO UPDATE SET allocated_gpu_seconds = t.allocated_gpu_seconds + EXCLUDED.allocated_gpu_seconds;"""
_NEW = "SELECT job_id, allocated_gpu_seconds AS seconds FROM new_rows WHERE bucket = 86400"
_OLD = "SELECT job_id, -allocated_gpu_seconds AS seconds FROM old_rows WHERE bucket = 86400"

CREATE = [
    "LOCK TABLE controlplane_usagerollup IN SHARE ROW EXCLUSIVE MODE",
    f"CREATE TABLE {SUMS} (job_id bigint PRIMARY KEY, allocated_gpu_seconds numeric NOT NULL)",
    f"COMMENT ON TABLE {SUMS} IS 'Each job''s day rollups'' allocated GPU-seconds summed, kept by the "
    f"triggers {SUMS}_* on controlplane_usagerollup (migration 0024)'",
    f"""CREATE FUNCTION {SUMS}_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN{_UPSERT.format(rows=_NEW)}
        ELSIF TG_OP = 'DELETE' THEN{_UPSERT.format(rows=_OLD)}
        ELSE{_UPSERT.format(rows=f"{_NEW} UNION ALL {_OLD}")}
        END IF;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION {SUMS}_empty() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE {SUMS};
        RETURN NULL;
    END $$""",
    f"CREATE TRIGGER {SUMS}_insert AFTER INSERT ON controlplane_usagerollup REFERENCING NEW TABLE AS new_rows "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {SUMS}_add()",
    f"CREATE TRIGGER {SUMS}_update AFTER UPDATE ON controlplane_usagerollup REFERENCING OLD TABLE AS old_rows "
    f"NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {SUMS}_add()",
    f"CREATE TRIGGER {SUMS}_delete AFTER DELETE ON controlplane_usagerollup REFERENCING OLD TABLE AS old_rows "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {SUMS}_add()",
    f"CREATE TRIGGER {SUMS}_truncate AFTER TRUNCATE ON controlplane_usagerollup "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {SUMS}_empty()",
    f"""INSERT INTO {SUMS} (job_id, allocated_gpu_seconds)
        SELECT job_id, SUM(allocated_gpu_seconds) FROM controlplane_usagerollup WHERE bucket = 86400
        GROUP BY job_id HAVING SUM(allocated_gpu_seconds) <> 0""",
]
DROP = [
    *(f"DROP TRIGGER IF EXISTS {SUMS}_{op} ON controlplane_usagerollup" for op in ("insert", "update", "delete", "truncate")),
    f"DROP FUNCTION IF EXISTS {SUMS}_add()",
    f"DROP FUNCTION IF EXISTS {SUMS}_empty()",
    f"DROP TABLE IF EXISTS {SUMS}",
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
        ('controlplane', '0023_job_singleton'),
    ]

    operations = [
        migrations.RunPython(_run(CREATE), _run(DROP), elidable=False),
    ]
