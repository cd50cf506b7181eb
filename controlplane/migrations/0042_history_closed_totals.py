# The history's totals (services/job_history.history_totals) and total cost
# (services/job_costs.jobs_total_cost) read every ended job of the set on each read of /history/:
# 300–560 ms at 99,566 ended jobs (docs/benchmarks.md, Scale audit), growing with all of history.
# Yet a job that ended days ago adds the same figures on every read, until someone changes it. So
# (PostgreSQL only; services/closed_history.py builds and reads them):
#
# controlplane_history_closed_totals: per team and end state, the totals of the ended jobs that
# finished before `horizon` (the start of the previous UTC day when built): how many, their
# GPU-hours and lost GPU-hours (each job's as its row rounds it, added up exactly) and their cost
# in cents (each job's remembered cost, migration 0036; built only when every one of them holds).
#
# controlplane_history_closed (one row): the horizon, the price generation the cents were read
# under, `changes` and `built_changes`. The totals hold only while `changes` = `built_changes`
# and the price generation is still the one they were built under. `changes` is raised, in the
# transaction of the write, by every change to what a closed job adds:
#   - a job row inserted, deleted or changed in its state, team, end, lost work or requeue count
#     (a requeue is what a job's cost row is stamped with), if it ended more than an hour ago
#     (before or after the change: triggers on controlplane_job);
#   - a job's day rollups' sum (controlplane_job_day_gpu_seconds, migration 0024) written for a
#     job that ended more than an hour ago (the accounting's late rows, a recomputation, a repair);
#   - a TRUNCATE of either.
# An hour, not the horizon: a write whose trigger ran before a rebuild read `changes` but which
# commits after it is still seen (it raised `changes` past what the rebuild read), unless its job
# had ended within the hour before that write and before the rebuild's horizon (at least a day
# back): a transaction left open for 23 hours.
#
# SQLite (the demo) gets nothing: the history adds up every job there.

from django.db import migrations

CLOSED = "controlplane_history_closed"
TOTALS = "controlplane_history_closed_totals"
SUMS = "controlplane_job_day_gpu_seconds"
ENDED = "('succeeded', 'failed', 'cancelled', 'timed_out')"


def _closed(row: str) -> str:
    """SQL: `row` (a job row) ended more than an hour ago."""
    return f"({row}.state IN {ENDED} AND {row}.finished_at < clock_timestamp() - interval '1 hour')"


def _figures(row: str) -> str:
    """SQL: what a job row's own figures in the history depend on."""
    return ", ".join(f"{row}.{column}" for column in ("state", "team_id", "finished_at", "lost_gpu_seconds", "requeue_count"))

CREATE = [
    f"""CREATE TABLE {CLOSED} (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        horizon timestamptz, prices bigint, changes bigint NOT NULL DEFAULT 0, built_changes bigint,
        built_at timestamptz)""",
    f"COMMENT ON TABLE {CLOSED} IS 'When the history''s closed totals ({TOTALS}) were built and whether they "
    f"still hold (migration 0042; services/closed_history.py)'",
    f"INSERT INTO {CLOSED} (changes) VALUES (0)",
    f"""CREATE TABLE {TOTALS} (team_id bigint NOT NULL, state varchar(16) NOT NULL, jobs bigint NOT NULL,
        gpu_hours numeric NOT NULL, lost_gpu_hours numeric NOT NULL, cents bigint NOT NULL,
        PRIMARY KEY (team_id, state))""",
    f"COMMENT ON TABLE {TOTALS} IS 'Per team and end state, the totals of the jobs that ended before "
    f"{CLOSED}.horizon (migration 0042; services/closed_history.py)'",
    f"""CREATE FUNCTION {CLOSED}_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {CLOSED} SET changes = changes + 1;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION {CLOSED}_sums_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM changed_rows c JOIN controlplane_job j ON j.id = c.job_id WHERE {_closed('j')}) THEN
            UPDATE {CLOSED} SET changes = changes + 1;
        END IF;
        RETURN NULL;
    END $$""",
    # Row triggers with a WHEN on the jobs: the scheduler's writes to running and waiting jobs
    # never call the function (a statement trigger would collect every changed row first).
    f"CREATE TRIGGER {CLOSED}_job_insert AFTER INSERT ON controlplane_job FOR EACH ROW "
    f"WHEN {_closed('NEW')} EXECUTE FUNCTION {CLOSED}_changed()",
    f"CREATE TRIGGER {CLOSED}_job_update AFTER UPDATE ON controlplane_job FOR EACH ROW "
    f"WHEN (({_closed('OLD')} OR {_closed('NEW')}) AND ({_figures('OLD')}) IS DISTINCT FROM ({_figures('NEW')})) "
    f"EXECUTE FUNCTION {CLOSED}_changed()",
    f"CREATE TRIGGER {CLOSED}_job_delete AFTER DELETE ON controlplane_job FOR EACH ROW "
    f"WHEN {_closed('OLD')} EXECUTE FUNCTION {CLOSED}_changed()",
    f"CREATE TRIGGER {CLOSED}_job_truncate AFTER TRUNCATE ON controlplane_job "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {CLOSED}_changed()",
    f"CREATE TRIGGER {CLOSED}_sums_insert AFTER INSERT ON {SUMS} REFERENCING NEW TABLE AS changed_rows "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {CLOSED}_sums_changed()",
    f"CREATE TRIGGER {CLOSED}_sums_update AFTER UPDATE ON {SUMS} REFERENCING NEW TABLE AS changed_rows "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {CLOSED}_sums_changed()",
    f"CREATE TRIGGER {CLOSED}_sums_delete AFTER DELETE ON {SUMS} REFERENCING OLD TABLE AS changed_rows "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {CLOSED}_sums_changed()",
    f"CREATE TRIGGER {CLOSED}_sums_truncate AFTER TRUNCATE ON {SUMS} "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {CLOSED}_changed()",
]
DROP = [
    *(f"DROP TRIGGER IF EXISTS {CLOSED}_job_{op} ON controlplane_job" for op in ("insert", "update", "delete", "truncate")),
    *(f"DROP TRIGGER IF EXISTS {CLOSED}_sums_{op} ON {SUMS}" for op in ("insert", "update", "delete", "truncate")),
    f"DROP FUNCTION IF EXISTS {CLOSED}_changed()",
    f"DROP FUNCTION IF EXISTS {CLOSED}_sums_changed()",
    f"DROP TABLE IF EXISTS {TOTALS}",
    f"DROP TABLE IF EXISTS {CLOSED}",
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
        ('controlplane', '0041_node_agent_refused_event_kind'),
    ]

    operations = [
        # No build here: a migration that called services/closed_history.py would run today's
        # code against the schema of its own time. The totals are left unbuilt, so unread, until
        # the next run of qm.accounting.remember_job_costs builds them (within a minute).
        migrations.RunPython(_run(CREATE), _run(DROP)),
    ]
