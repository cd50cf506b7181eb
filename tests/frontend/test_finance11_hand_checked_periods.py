"""Finance's hand checks, end to end: a scenario whose dollars are worked out by hand in each
test, read on /showback/, in its CSV download and from the API, over days and a week.

Real rollups on PostgreSQL over the demo fleet (H100 reserved $2.50, on-demand $4.10 per GPU-hour).
Every job runs on whole, known intervals two and three days back, so the periods are fixed
instants (`start,end`), days (`yesterday`-like `start,end` of UTC days) and the week.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import CapacityTier
from controlplane.models import Job, Node
from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, running_job
from tests.frontend.page_data import priority, team

pytestmark = pytest.mark.django_db


def day_start() -> Any:
    return accounting.floor_to(timezone.now(), accounting.DAY)


def span(a: Any, b: Any) -> str:
    return f"{accounting.iso(a)},{accounting.iso(b)}"


def page_rows(client: Any, query: str) -> tuple[dict[str, dict[str, Any]], str]:
    response = client.get(f"/showback/?{query}")
    assert response.status_code == 200
    return {r["name"]: r for r in response.context["rows"]}, response.content.decode()


def csv_of(client: Any, html: str) -> dict[str, dict[str, str]]:
    href = re.search(r'href="([^"]+)" id="csv-download"', html).group(1).replace("&amp;", "&")
    response = client.get(href)
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    return {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


def reserved_h100() -> Node:
    return Node.objects.filter(gpu_type__name="H100-80GB", capacity_tier=CapacityTier.RESERVED).order_by("name")[0]


@pytest.fixture
def across_midnight(demo: None) -> Any:
    """vision holds 4 reserved H100 from 22:00 three days back to 00:00 two days back (2 h:
    8 GPU-h, $20.00) and again from 23:00 to 01:00 across the next midnight (1 h each side:
    4 GPU-h, $10.00, on each day). Rolled up to now."""
    d = day_start() - timedelta(days=2)
    node = reserved_h100()
    job = running_job(team("vision"), gpus=4, started_at=d - timedelta(hours=2), priority_class=priority("research"))
    hold(job, [(node, 4)], d - timedelta(hours=2), d)
    Job.objects.filter(pk=job.pk).update(state="succeeded", finished_at=d, state_changed_at=d, exit_code=0)
    second = running_job(team("vision"), gpus=4, started_at=d + timedelta(hours=23), priority_class=priority("research"))
    hold(second, [(node, 4)], d + timedelta(hours=23), d + timedelta(hours=25))
    accounting.catch_up(timezone.now())
    return d, job


def test_two_hours_on_four_gpus_is_twenty_dollars_on_the_page_the_csv_and_the_api(client_for, across_midnight):
    d, job = across_midnight
    client = client_for("finn")
    rows, html = page_rows(client, f"window={span(d - timedelta(hours=2), d)}")
    vision = rows["vision"]
    assert vision["cost_usd"] == Decimal("20.00")
    assert vision["hours_shown"]["allocated"] == Decimal("8.00")
    assert vision["prices_shown"]["usd_per_gpu_hour"] == Decimal("2.50")
    assert rows["language"]["cost_usd"] == Decimal("0.00")    # a team with no usage: a row of zeros
    table = csv_of(client, html)
    assert table["vision"]["cost_usd"] == "20.00" and table["vision"]["gpu_hours_allocated"] == "8.0000"
    assert table["vision"]["usd_per_gpu_hour"] == "2.5000"
    body = client.get(f"/api/v1/showback/?window={span(d - timedelta(hours=2), d)}").json()
    api = next(a for a in body["data"][0].values() if a["name"] == "vision")
    assert api["totalCost"] == 20.0 and api["gpuHours"] == 8.0
    # the job's own cost, run by run (finance sees costs, not jobs: the admin reads it)
    runs = client_for("admin").get(f"/api/v1/jobs/{job.pk}/runs/").json()
    assert runs["total_cost_usd"] == 20.0, runs


@pytest.mark.parametrize(("days_back", "expected"), [(3, "20.00"), (2, "10.00"), (1, "10.00")])
def test_each_utc_day_charges_its_own_hours(client_for, across_midnight, days_back, expected):
    """Day d−1 has the first job's 2 h (8 GPU-h), day d the second's first hour, day d+1 its last."""
    start = day_start() - timedelta(days=days_back)
    rows, html = page_rows(client_for("finn"), f"window={span(start, start + timedelta(days=1))}")
    assert rows["vision"]["cost_usd"] == Decimal(expected)
    assert csv_of(client_for("finn"), html)["vision"]["cost_usd"] == expected


def test_the_days_add_up_to_the_week(client_for, across_midnight):
    rows, html = page_rows(client_for("finn"), "window=7d")
    assert rows["vision"]["cost_usd"] == Decimal("40.00")
    assert rows["vision"]["hours_shown"]["allocated"] == Decimal("16.00")
    table = csv_of(client_for("finn"), html)
    assert table["vision"]["cost_usd"] == "40.00"
    body = [r for r in rows.values() if not r["is_total"]]
    assert sum(r["cost_usd"] for r in body) == rows["TOTAL"]["cost_usd"]
    assert sum(Decimal(r["cost_usd"]) for k, r in table.items() if k != "TOTAL") == Decimal(table["TOTAL"]["cost_usd"])


def nodes(tier: str, count: int) -> list[Node]:
    return list(Node.objects.filter(gpu_type__name="H100-80GB", capacity_tier=tier).order_by("name")[:count])


@pytest.fixture
def vision_borrows_for_an_hour(demo: None) -> Any:
    """The hour 10:00–11:00 two days back: vision (H100 guarantee 40) holds 40 GPUs on five reserved
    nodes and 4 more, borrowed, on an on-demand node; language (32) and serving (24) hold nothing.

    vision: 44 GPU-h, 40 × $2.50 + 4 × $4.10 = $116.40; borrowed 4 GPU-h, lent by language and
    serving in proportion to their unused guarantees, 32 : 24 → 16/7 and 12/7 GPU-h. Idle reserved
    quota: language 32 − 16/7 = 29.714 GPU-h × $2.50 = $74.29, serving 24 − 12/7 = 22.286 GPU-h ×
    $2.50 = $55.71, vision none. The fleet (8 reserved, 4 on-demand nodes of 8 H100, 4 × 8 A100
    spot at $0.80): idle H100 3 × 8 × $2.50 + 28 × $4.10 = $174.80, idle A100 32 × $0.80 = $25.60
    (guarantees 8 + 16 + 8 = 32 A100 idle at the A100 reserved $1.10: $8.80, $17.60, $8.80)."""
    start = day_start() - timedelta(days=2) + timedelta(hours=10)
    end = start + timedelta(hours=1)
    research = priority("research")
    own = running_job(team("vision"), gpus=40, started_at=start, priority_class=research)
    hold(own, [(n, 8) for n in nodes(CapacityTier.RESERVED, 5)], start, end)
    borrowed = running_job(team("vision"), gpus=4, started_at=start, priority_class=research)
    hold(borrowed, [(nodes(CapacityTier.ON_DEMAND, 1)[0], 4)], start, end, borrowed=True)
    accounting.catch_up(timezone.now())
    return start, end


def test_borrowed_lent_and_idle_reserved_quota_to_the_cent(client_for, vision_borrows_for_an_hour):
    start, end = vision_borrows_for_an_hour
    client = client_for("finn")
    rows, html = page_rows(client, f"window={span(start, end)}")
    assert rows["vision"]["cost_usd"] == Decimal("116.40")
    assert rows["vision"]["hours_shown"]["allocated"] == Decimal("44.00")
    assert rows["vision"]["hours_shown"]["borrowed"] == Decimal("4.00")
    assert rows["vision"]["idle_reserved_usd"] == Decimal("8.80")        # its A100 guarantee, unused
    assert rows["language"]["idle_reserved_usd"] == Decimal("91.89")     # $74.29 H100 + $17.60 A100
    assert rows["serving"]["idle_reserved_usd"] == Decimal("64.51")      # $55.71 H100 + $8.80 A100
    assert rows["__idle__"]["cost_usd"] == Decimal("200.40")              # $174.80 H100 + $25.60 A100
    assert rows["TOTAL"]["cost_usd"] == Decimal("316.80")
    table = csv_of(client, html)
    for name, cost in (("vision", "116.40"), ("__idle__", "200.40"), ("TOTAL", "316.80")):
        assert table[name]["cost_usd"] == cost
    assert table["language"]["idle_reserved_usd"] == "91.89"
    assert table["vision"]["gpu_hours_borrowed"] == "4.0000"


@pytest.fixture
def preempted_rolled_back_and_repriced(demo: None) -> Any:
    """Two days back, on one reserved H100 node: language's job holds 4 GPUs 10:00–11:00 making
    1,000 useful tokens/s, checkpointed at 10:30, preempted at 11:00 (4 GPUs × 30 min = 2 GPU-h
    lost, its 1.8 M tokens since the checkpoint not retained), requeued and bound again
    11:00–12:00 (1,000 tokens/s). From 11:30 the H100 reserved price is $3.10.

    cost = 4 × 1.5 h × $2.50 + 4 × 0.5 h × $3.10 = $15.00 + $6.20 = $21.20; preemption waste
    = 2 GPU-h at $2.50 = $5.00; useful tokens 1.8 M + 3.6 M = 5.4 M: $21.20 / 5.4 = $3.926 per
    1M tokens. A second job of language, evaluated in steps only, holds 2 GPUs 10:00–11:00 on the
    same node: $5.00, its cost without tokens."""
    from controlplane.models import Job, PriceRate
    from controlplane.services import transitions
    from tests.controlplane.accounting.builders import report

    d = day_start() - timedelta(days=2)
    t10 = d + timedelta(hours=10)
    node = reserved_h100()
    gpu_type = node.gpu_type
    PriceRate.objects.create(gpu_type=gpu_type, capacity_tier=CapacityTier.RESERVED, usd_per_gpu_hour=Decimal("3.10"),
                             effective_from=t10 + timedelta(minutes=90))
    research = priority("research")
    job = running_job(team("language"), gpus=4, started_at=t10, priority_class=research,
                      last_checkpoint_at=t10 + timedelta(minutes=30))
    first = hold(job, [(node, 4)], t10)
    report(first, node, t10, t10 + timedelta(hours=1), tokens_per_s=1000, steps_per_s=0)
    assert transitions.signal_stop(first.pk, first.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=30, at=t10 + timedelta(minutes=59, seconds=30), actor="test",
                                   message="preempted")
    assert transitions.complete_release(first.pk, exit_code=None, at=t10 + timedelta(hours=1), actor="test")
    Job.objects.filter(pk=job.pk).update(state="running", started_at=t10 + timedelta(hours=1))
    second = hold(job, [(node, 4)], t10 + timedelta(hours=1), t10 + timedelta(hours=2), first_index=0)
    report(second, node, t10 + timedelta(hours=1), t10 + timedelta(hours=2), tokens_per_s=1000, steps_per_s=0)
    evaluation = running_job(team("language"), gpus=2, started_at=t10, priority_class=research)
    steps = hold(evaluation, [(node, 2)], t10, t10 + timedelta(hours=1), first_index=4)
    report(steps, node, t10, t10 + timedelta(hours=1), steps_per_s=5)
    accounting.catch_up(timezone.now())
    return t10, job, evaluation


def test_preemption_rollback_requeue_and_a_price_change_to_the_cent(client_for, preempted_rolled_back_and_repriced):
    t10, job, evaluation = preempted_rolled_back_and_repriced
    client = client_for("finn")
    query = f"window={span(t10, t10 + timedelta(hours=2))}"
    rows, html = page_rows(client, query)
    language = rows["language"]
    assert language["cost_usd"] == Decimal("26.20")
    assert language["preemption_waste_usd"] == Decimal("5.00")
    assert language["hours_shown"]["lost"] == Decimal("2.00")
    assert language["useful_tokens"] == 5_400_000
    assert language["cost_without_tokens_usd"] == Decimal("5.00")
    assert language["usd_per_million_tokens"].quantize(Decimal("0.0001")) == Decimal("3.9259")
    table = csv_of(client, html)
    assert table["language"]["cost_usd"] == "26.20" and table["language"]["preemption_waste_usd"] == "5.00"
    assert table["language"]["useful_tokens"] == "5400000"
    by_job = client.get(f"/api/v1/showback/?{query}&group_by=job&format=csv").content.decode()
    jobs = {r["job"]: r for r in csv.DictReader(io.StringIO(by_job))}
    assert jobs[str(job.pk)]["cost_usd"] == "21.20" and jobs[str(evaluation.pk)]["cost_usd"] == "5.00"
    assert jobs[str(job.pk)]["preemption_waste_usd"] == "5.00"
    assert jobs[str(evaluation.pk)]["cost_without_tokens_usd"] == "5.00"


@pytest.fixture
def tokens_only_after_the_window(demo: None) -> Any:
    """Two days back, language's serving job holds 4 reserved H100 10:00–11:00: it loads its
    model until 10:30 (no tokens) and serves 1,000 tokens/s from then. Read over 10:00–10:30 its
    cost, 4 × 0.5 h × $2.50 = $5.00, is a token-reporting job's, yet no token was kept in it."""
    from tests.controlplane.accounting.builders import report

    t10 = day_start() - timedelta(days=2) + timedelta(hours=10)
    node = reserved_h100()
    job = running_job(team("language"), gpus=4, started_at=t10, priority_class=priority("research"))
    allocation = hold(job, [(node, 4)], t10, t10 + timedelta(hours=1))
    report(allocation, node, t10, t10 + timedelta(minutes=30), tokens_per_s=0, steps_per_s=0)
    report(allocation, node, t10 + timedelta(minutes=30), t10 + timedelta(hours=1), tokens_per_s=1000, steps_per_s=0)
    accounting.catch_up(timezone.now())
    return t10


def test_a_row_whose_token_jobs_kept_no_tokens_says_where_its_cost_is(client_for, tokens_only_after_the_window):
    """Its $ / 1M tokens is '–' and its cost without tokens $0.00 (0%): the page's note says the
    cost of jobs that reported none is under Cost without tokens, so the $5.00 was nowhere
    (finance walk, 8 Dec). The page now says whose token-reporting cost kept no tokens here."""
    t10 = tokens_only_after_the_window
    rows, html = page_rows(client_for("finn"), f"window={span(t10, t10 + timedelta(minutes=30))}")
    language = rows["language"]
    assert language["cost_usd"] == Decimal("5.00") and language["useful_tokens"] == 0
    assert language["usd_per_million_tokens"] is None and language["cost_without_tokens_usd"] == Decimal("0.00")
    note = re.search(r'<p class="note" id="tokens-not-kept">([^<]*)</p>', html)
    assert note is not None, html
    assert "language" in note.group(1) and "$5.00" in note.group(1), note.group(1)
    # over the whole hour its tokens were kept: nothing to say
    _, whole = page_rows(client_for("finn"), f"window={span(t10, t10 + timedelta(hours=1))}")
    assert 'id="tokens-not-kept"' not in whole


def test_a_requeue_someone_asked_for_is_counted_as_preemption_waste_and_the_page_says_so(client_for, submit_as):
    """vision's job runs 8 reserved H100 for an hour, checkpointed 30 min before alice asks for a
    requeue: 8 GPUs × 30 min = 4 GPU-h thrown away, done again from the checkpoint: $10.00 under
    Preemption waste, which the page said nowhere was anything but preemptions (finance walk,
    8 Dec: its table note did not say what the column counts)."""
    from django.contrib.auth import get_user_model

    from controlplane.models import Allocation
    from controlplane.services import requeue, transitions
    from controlplane.services.cycle import run_cycle

    now = timezone.now().replace(microsecond=0)
    job = submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test", now=now - timedelta(hours=1))
    allocation = Allocation.objects.get(job=job)
    Node.objects.filter(pk=allocation.gpus.first().node_id).update(capacity_tier=CapacityTier.RESERVED)
    Job.objects.filter(pk=job.pk).update(last_checkpoint_at=now - timedelta(minutes=30), started_at=now - timedelta(hours=1))
    asked = requeue.requeue(get_user_model().objects.get(username="alice"), job.pk, reason="new data")
    assert asked.job.pk == job.pk
    assert transitions.complete_release(allocation.pk, exit_code=None, at=timezone.now(), actor="test")
    # rolled past the requeue's minute: a report ends on the last whole minute rolled
    accounting.catch_up(accounting.floor_to(timezone.now(), accounting.MINUTE) + timedelta(minutes=2))
    rows, html = page_rows(client_for("finn"), f"window={span(now - timedelta(hours=2), now + timedelta(hours=1))}")
    waste = rows["vision"]["preemption_waste_usd"]
    assert Decimal("10.00") <= waste <= Decimal("10.10"), waste     # 30 min of 8 GPUs at $2.50, and the seconds since
    note = re.search(r'<p class="note">(Cost = .*?)</p>', html, re.S).group(1)
    assert "Preemption waste" in note and "a requeue someone asked for" in note, note
