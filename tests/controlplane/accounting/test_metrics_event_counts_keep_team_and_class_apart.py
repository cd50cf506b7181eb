"""/metrics' job counters keep each (team, priority class, reason) apart, whatever the names hold.

The accounting folds job events into counts stored under one text key per kind, team, priority
class and reason, joined with `|`. Team and class names are slugs (no `|`), but the database does
not enforce it: a team or class written around the validation (a shell, a data import, SQL) can
hold one. Found (7 Dec): team `a|b`'s jobs in class `c` and team `a`'s in class `b|c` were
counted under one key, `job.bound|a|b|c|`, and /metrics read it back as team `a`, class `b`:
two admissions of teams and classes that do not exist, and none of theirs. Each part of the key
now writes `%` as `%25` and `|` as `%7C`; slug names and reason codes have neither, so every key
stored before reads as it did, and the counters go on from it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.services import accounting, transitions
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.accounting.test_accounting_metrics import scrape


def test_admissions_of_teams_and_classes_with_a_bar_are_counted_apart(fleet: Any, clients: dict[str, Any]) -> None:
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(minutes=10)
    pairs = ((f.make_team("a|b", cohort=fleet.ml.cohort), f.make_priority_class("c", 50), fleet.nodes[1]),
             (f.make_team("a", cohort=fleet.ml.cohort), f.make_priority_class("b|c", 60), fleet.nodes[2]))
    for team, priority_class, node in pairs:
        job = running_job(team, gpus=1, started_at=start, priority_class=priority_class)
        allocation = hold(job, [(node, 1)], start)
        transitions.record_event(EventKind.JOB_BOUND, "test", job=job, allocation=allocation, at=start,
                                 reason="Admitted")
    accounting.catch_up(now)

    admitted = scrape(clients["admin"])["quartermaster_admitted_jobs_total"]

    assert admitted.get((("priority_class", "c"), ("team", "a|b"))) == 1, admitted
    assert admitted.get((("priority_class", "b|c"), ("team", "a"))) == 1, admitted
    assert (("priority_class", "b"), ("team", "a")) not in admitted, admitted


def test_a_key_of_slug_names_reads_as_it_was_stored() -> None:
    # Keys stored before the escaping keep their labels (and their counts go on).
    key = accounting.event_count_key("job.finished", "ml", "research", "Succeeded")
    assert key == "job.finished|ml|research|Succeeded"
    assert accounting.event_count_labels(key) == ("job.finished", "ml", "research", "Succeeded")
    assert accounting.event_count_labels("job.bound|ml|research|") == ("job.bound", "ml", "research", "")
    for parts in (("k", "a|b", "c", ""), ("k", "a", "b|c", ""), ("k", "50%7C", "%", "x|y"), ("k", "", "", "")):
        assert accounting.event_count_labels(accounting.event_count_key(*parts)) == parts
