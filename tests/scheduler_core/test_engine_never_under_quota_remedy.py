"""What would start a job its quota can never admit: for a team in a cohort, a larger quota or
borrowing limit; for a team in no cohort, a larger quota or a cohort to borrow from.

Found on the demo: vision, moved out of every cohort with 0 nominal A100s, had a 2-GPU A100 job
told "would start if team vision's quota or borrowing limit grows". A borrowing limit on a team
in no cohort never applies, and is refused on its field (Quota.clean, "put the team in a cohort
first"): the remedy named one the admin could not set."""

from __future__ import annotations

from engine_builders import make_cluster, make_job, why

from scheduler_core import ReasonCode


def _never(cohort: str | None, *, other_cohort: str | None = None):
    plan = (
        make_cluster().nodes(3, gpu_type="h100").at(0)
        .quota("ml", "h100", 4, cohort=cohort).quota("cv", "h100", 12, cohort=other_cohort or cohort)
        .pending(make_job("j").team("ml").gpus(20).limit(3600))
        .plan()
    )
    j = why(plan, "j")
    assert j.code is ReasonCode.CAN_NEVER_RUN, j
    return j


def test_a_team_in_a_cohort_is_told_its_quota_or_borrowing_limit_grows():
    assert _never("shared").would_start_if == "team ml's quota or borrowing limit grows"


def test_a_team_in_no_cohort_is_told_its_quota_grows_or_it_joins_a_cohort():
    j = _never(None, other_cohort="others")

    assert j.would_start_if == "team ml's quota grows, or it joins a cohort with GPUs to lend"


def test_a_team_with_no_quota_at_all_is_told_as_before():
    """Its cohort is not known to the engine (it comes with the quotas): the remedy stays."""
    plan = (
        make_cluster().nodes(3, gpu_type="h100").at(0).quota("cv", "h100", 12)
        .pending(make_job("j").team("ml").gpus(20).limit(3600))
        .plan()
    )

    assert why(plan, "j").would_start_if == "team ml's quota or borrowing limit grows"
