"""Migration 0035 stores the exit codes of jobs killed by a signal as a shell reports them:
-9 (the agent saw the process end) becomes 137, so the history's `exit_code=137` finds every
SIGKILL; other codes stay."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from controlplane.models import Job
from tests.controlplane import factories as f

BEFORE = [("controlplane", "0034_quota_limits_cleared_out_of_cohort")]
AFTER = [("controlplane", "0035_exit_codes_of_signal_deaths")]


@pytest.mark.django_db(transaction=True)
def test_a_signal_death_stored_as_minus_n_reads_128_plus_n_and_other_codes_stay() -> None:
    team = f.make_team("t")
    codes = [-9, -15, 137, 1, 0, None, -100]
    made = [f.make_job(team, name=f"j{i}") for i in range(len(codes))]
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    # Only the exit code is read and written here: columns added to jobs after 0035 (0047's
    # members_on_distinct_nodes) are not there while the schema is 0034's or 0035's.
    for job, code in zip(made, codes, strict=True):
        Job.objects.filter(pk=job.pk).update(exit_code=code)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        stored = dict(Job.objects.filter(pk__in=[j.pk for j in made]).values_list("pk", "exit_code"))
        assert [stored[j.pk] for j in made] == [137, 143, 137, 1, 0, None, -100]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
