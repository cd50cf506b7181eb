"""Quota against use, and the spread of waits and slowdowns, as the teams page reads them."""

from __future__ import annotations

import random
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job, Quota
from controlplane.services.cycle import run_cycle
from frontend.team_stats import Bin, box_from_bins, quota_rows, waits_and_slowdowns

pytestmark = pytest.mark.django_db


def exact_quartiles(values: list[float]) -> tuple[float, float, float]:
    xs = sorted(values)

    def q(p: float) -> float:
        pos = (len(xs) - 1) * p
        lo = int(pos)
        hi = min(len(xs) - 1, lo + 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return q(0.25), q(0.5), q(0.75)


def test_bins_of_single_values_give_exact_quartiles_and_tukeys_whiskers():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 100]
    stats = box_from_bins([Bin(1, v, v, v) for v in values])
    assert stats["n"] == 10
    assert (stats["q1"], stats["median"], stats["q3"]) == (3.25, 5.5, 7.75)
    assert stats["low"] == 1 and stats["high"] == 9  # 100 lies beyond 1.5 box heights
    assert stats["max"] == 100 and stats["mean"] == 14.5


def test_nothing_binned_says_so():
    assert box_from_bins([]) == {"n": 0}


def test_quartiles_in_the_database_are_within_a_bins_width_of_the_exact_ones(demo, submit_as):
    now = timezone.now()
    rng = random.Random(3)
    waits = [rng.expovariate(1 / 900.0) for _ in range(400)]  # seconds, mean 15 min
    jobs = [submit_as("alice", name=f"w{i}", gpus=1) for i in range(len(waits))]
    for job, wait in zip(jobs, waits, strict=True):
        Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(hours=2),
                                             started_at=now - timedelta(hours=2) + timedelta(seconds=wait))
    (stats,), _ = waits_and_slowdowns(now - timedelta(hours=3), now)
    exact = exact_quartiles([w / 60 for w in waits])
    for got, want in zip((stats["q1"], stats["median"], stats["q3"]), exact, strict=True):
        assert got == pytest.approx(want, rel=0.06)
    assert stats["mean"] == pytest.approx(sum(waits) / len(waits) / 60, abs=1e-3)
    assert stats["max"] == pytest.approx(max(waits) / 60, abs=1e-3)


def test_distribution_reads_a_handful_of_grouped_rows_in_one_query_per_measure(demo, django_assert_num_queries):
    now = timezone.now()
    with django_assert_num_queries(2):
        waits_and_slowdowns(now - timedelta(days=7), now, {})


def test_borrowing_team_shows_borrowed_and_idle_owner_shows_lent(demo, submit_as, django_assert_num_queries):
    # language's quota on H100 is 32; it runs 48 GPUs there: 16 borrowed from its cohort.
    for i in range(6):
        submit_as("bob", name=f"l{i}", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    with django_assert_num_queries(2):
        rows = {(r.team, r.gpu_type): r for r in quota_rows(None)}
    language = rows[("language", "H100-80GB")]
    assert (language.nominal, language.used, language.borrowed) == (32, 48, 16)
    lent = sum(r.lent for (team, gpu), r in rows.items() if gpu == "H100-80GB")
    assert lent == pytest.approx(16.0)
    vision = rows[("vision", "H100-80GB")]
    serving = rows[("serving", "H100-80GB")]
    # vision (40 idle) and serving (24 idle) lend in proportion to their idle quota.
    assert vision.lent == pytest.approx(16 * 40 / 64) and serving.lent == pytest.approx(16 * 24 / 64)


def test_lending_limit_caps_what_a_team_lends(demo, submit_as):
    Quota.objects.filter(team__name="serving", gpu_type__name="H100-80GB").update(lending_limit=0)
    for i in range(6):
        submit_as("bob", name=f"l{i}", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    rows = {(r.team, r.gpu_type): r for r in quota_rows(None)}
    assert rows[("serving", "H100-80GB")].lent == 0
    assert rows[("vision", "H100-80GB")].lent == pytest.approx(16.0)


def test_quota_rows_for_a_member_hold_their_team_only(demo):
    vision_id = Quota.objects.filter(team__name="vision").values_list("team_id", flat=True).first()
    assert {r.team for r in quota_rows([vision_id])} == {"vision"}


def test_waits_and_slowdowns_per_team(demo, submit_as):
    now = timezone.now()
    a = submit_as("alice", name="a")
    b = submit_as("alice", name="b")
    Job.objects.filter(pk=a.pk).update(submitted_at=now - timedelta(minutes=70), started_at=now - timedelta(minutes=60),
                                       finished_at=now - timedelta(minutes=30), state=JobState.SUCCEEDED)
    Job.objects.filter(pk=b.pk).update(submitted_at=now - timedelta(minutes=50), started_at=now - timedelta(minutes=20))
    waits, slowdowns = waits_and_slowdowns(now - timedelta(hours=2), now)
    assert [w["team"] for w in waits] == ["vision"]
    assert (waits[0]["n"], waits[0]["q1"], waits[0]["median"], waits[0]["max"]) == (2, 15.0, 20.0, 30.0)
    assert (slowdowns[0]["n"], slowdowns[0]["median"]) == (1, round(40 / 30, 3))


def test_a_job_that_ran_seconds_has_a_bounded_slowdown_of_at_least_one(demo, submit_as):
    now = timezone.now()
    job = submit_as("alice", name="blip")
    Job.objects.filter(pk=job.pk).update(submitted_at=now - timedelta(seconds=15), started_at=now - timedelta(seconds=5),
                                         finished_at=now - timedelta(seconds=1), state=JobState.SUCCEEDED)
    _, slowdowns = waits_and_slowdowns(now - timedelta(hours=1), now)
    assert slowdowns[0]["median"] == 1.0 and slowdowns[0]["n"] == 1


def test_borrowing_is_lent_by_the_cohort_beside_capacity_nobody_is_guaranteed(demo, submit_as):
    # serving gives up its 24 H100 GPUs of guarantee: 24 GPUs are guaranteed to nobody, yet the
    # engine admits language's 16 borrowed GPUs only against vision's unused 40 (QuotaLedger),
    # so vision lends them (usage_tiers.idle_guarantees; until 7 Dec: lent by nobody).
    Quota.objects.filter(team__name="serving", gpu_type__name="H100-80GB").update(nominal_gpus=0)
    for i in range(6):
        submit_as("bob", name=f"l{i}", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    rows = {(r.team, r.gpu_type): r for r in quota_rows(None)}
    assert rows[("language", "H100-80GB")].borrowed == 16
    assert {team: r.lent for (team, gpu), r in rows.items() if gpu == "H100-80GB"} == \
        {"vision": 16.0, "language": 0.0, "serving": 0.0}


def test_a_month_merges_stored_days_with_the_partial_ones_exactly(demo, submit_as):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from controlplane.shared_store import shared_store
    from frontend.team_stats import DAY_KEY

    now = timezone.now()
    # waits of 1, 2, ... 12 minutes, two jobs a day over the last six days (today included)
    expected = []
    for i in range(12):
        job = submit_as("alice" if i % 3 else "bob", name=f"d{i}", gpus=1)
        start = now - timedelta(days=i // 2, minutes=5 + i)
        Job.objects.filter(pk=job.pk).update(submitted_at=start - timedelta(minutes=i + 1), started_at=start,
                                             finished_at=start + timedelta(minutes=30), state=JobState.SUCCEEDED)
        expected.append((("vision" if i % 3 else "language"), i + 1))
    since = now - timedelta(days=30)
    with CaptureQueriesContext(connection) as cold_queries:
        cold = waits_and_slowdowns(since, now)
    today = int(now.timestamp() // 86400)
    stored = shared_store().get_many([DAY_KEY.format(measure="wait", day=d) for d in range(today - 31, today + 1)])
    # every whole day of the window, empty ones too: not the partial first day, nor today
    assert sorted(stored) == sorted(DAY_KEY.format(measure="wait", day=d) for d in range(today - 29, today))
    with CaptureQueriesContext(connection) as warm_queries:
        warm = waits_and_slowdowns(since, now)
    assert warm == cold and len(cold_queries) == len(warm_queries) == 3  # team names, one per measure
    # the cold view also grouped the whole days; the warm one only the two partial days
    assert cold_queries[1]["sql"].count(" OR ") == 2 and warm_queries[1]["sql"].count(" OR ") == 1
    # the window's whole days were merged once: the next view reads that, not each day
    shared_store().delete(DAY_KEY.format(measure="wait", day=today - 3))
    assert waits_and_slowdowns(since, now) == cold
    waits = {row["team"]: row for row in cold[0]}
    for team in ("vision", "language"):
        mine = sorted(w for t, w in expected if t == team)
        assert waits[team]["n"] == len(mine) and waits[team]["max"] == pytest.approx(mine[-1], abs=1e-3)
        assert waits[team]["mean"] == pytest.approx(sum(mine) / len(mine), abs=1e-3)
    # slowdown of each: (30 + wait) / 30 minutes
    slow = {row["team"]: row for row in cold[1]}
    assert sum(row["n"] for row in slow.values()) == 10  # today's two finish after now
    assert slow["language"]["max"] == pytest.approx((30 + 10) / 30, abs=1e-3)




def test_the_teams_table_writes_whole_lent_gpus_as_whole_numbers(demo, submit_as, client):
    """Before: "uses 0, 10.0 lent" beside "uses 48, 16 borrowed"; a fraction only where the
    proportional split leaves one."""
    from django.contrib.auth.models import User

    for i in range(6):
        submit_as("bob", name=f"l{i}", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    client.force_login(User.objects.get(username="admin"))
    html = re.sub(r"<[^>]+>", "", client.get("/teams/").content.decode())   # the text a reader sees
    assert "H100-80GB: 40 / 32 — uses 0, 10 lent" in html
    assert "H100-80GB: 24 / 8 — uses 0, 6 lent" in html
    assert "10.0 lent" not in html
