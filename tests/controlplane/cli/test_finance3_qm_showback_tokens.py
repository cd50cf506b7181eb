"""Finance QA, round 3 (2 Dec), `qm showback`. It printed the price of a useful token as
`5.42e-08`, scientific notation in a table of dollars, where the page, the CSV and the JSON
all say $ per million tokens in fixed-point. It now prints `$/1M TOKENS` with the CSV's six
places, the JSON's `usdPerMillionTokens`."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from tests.controlplane.cli.showback_table import ml_job_ran, table_columns, table_row


def test_qm_showback_prints_dollars_per_million_tokens_in_fixed_point(qm, fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    ml_job_ran(fleet, gpus=8, start=now - timedelta(hours=2), held=timedelta(hours=1), tokens_per_s=1000.0,
               rolled_up_to=now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    api = qm("showback", "--by", "team", "--window", "1d", "--json").json()
    per_million = api["data"][0]["ml"]["usdPerMillionTokens"]
    assert per_million is not None and per_million > 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    assert not re.search(r"\de[-+]\d", r.out), r.out
    columns = table_columns(r.out)
    assert "$/1M TOKENS" in columns and "$/USEFUL TOKEN" not in columns
    assert table_row(r.out, "ml")["$/1M TOKENS"] == f"{per_million:,.6f}"


def test_qm_showback_says_idle_reserved_is_not_in_the_total(qm, fleet) -> None:
    """TOTAL's IDLE RESERVED $ sat beside its COST $ with nothing saying it is a reading of the
    idle capacity (already in __idle__'s cost), not a further charge: the page says so, qm did
    not."""
    from controlplane.services import accounting

    accounting.catch_up(timezone.now() - timedelta(minutes=10))
    accounting.catch_up(timezone.now())
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    totals = qm("showback", "--by", "team", "--window", "1h", "--json").json()["totals"]
    assert totals["idleReservedCost"] > 0  # the shared fleet's guarantees sat idle

    r = qm("showback", "--by", "team", "--window", "1h")

    assert r.code == 0, r.err
    note = [line for line in r.out.splitlines() if line.startswith("IDLE RESERVED $:")]
    assert len(note) == 1 and "not in COST $ or TOTAL" in note[0], r.out


def test_qm_showback_names_gpu_time_without_a_price(qm, fleet) -> None:
    """The shared fleet prices H100 only: its A100 nodes' capacity is counted at $0, which qm
    printed as a cheap fleet with no word (the page and the JSON now name it too)."""
    from controlplane.services import accounting

    accounting.catch_up(timezone.now() - timedelta(minutes=10))
    accounting.catch_up(timezone.now())
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    unpriced = qm("showback", "--by", "team", "--window", "1h", "--json").json()["unpriced"]
    assert [u["gpuType"] for u in unpriced] == ["A100-40GB"] and unpriced[0]["capacityGpuHours"] > 0

    r = qm("showback", "--by", "team", "--window", "1h")

    assert r.code == 0, r.err
    line = [x for x in r.out.splitlines() if x.startswith("Not priced")]
    assert len(line) == 1 and "A100-40GB" in line[0] and f"{unpriced[0]['capacityGpuHours']:,.2f} GPU-hours" in line[0]


def test_qm_showback_says_totals_price_is_fully_loaded(qm, fleet) -> None:
    """TOTAL's $/GPU-H divides what the whole fleet cost (idle capacity included) by the jobs'
    GPU-hours: far above every row's, with nothing in qm saying why (the page says so)."""
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, running_job

    now = timezone.now().replace(microsecond=0)
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1), priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    accounting.catch_up(now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    body = qm("showback", "--by", "team", "--window", "1d", "--json").json()
    assert body["totals"]["usdPerGpuHour"] > body["data"][0]["ml"]["usdPerGpuHour"]

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    assert "TOTAL's $/GPU-H is the fully loaded price: what the fleet cost, idle capacity included" in r.out
    alice = qm("login", "-u", "alice", "--password-stdin", stdin="alice\n")
    assert alice.code == 0
    member = qm("showback", "--by", "team", "--window", "1d")
    assert member.code == 0 and "fully loaded" not in member.out  # members read no fleet figures


def test_qm_showback_of_an_empty_period_says_no_price(qm, fleet) -> None:
    # With nothing held there is no $/GPU-H to explain ("-" in TOTAL): no line about it.
    from controlplane.services import accounting

    accounting.catch_up(timezone.now() - timedelta(minutes=6))  # a few whole minutes recorded, nothing held
    accounting.catch_up(timezone.now())
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    assert "TOTAL" in r.out and "fully loaded" not in r.out
    # A period before the accounting began has no figures at all, nor a price to explain
    # (test_finance5_qm_showback_before_accounting.py).
    before = qm("showback", "--by", "team", "--window", "2020-01-01T00:00:00Z,2020-02-01T00:00:00Z")
    assert before.code == 0 and "fully loaded" not in before.out and "Nothing was recorded" in before.out


def test_qm_showback_says_a_small_non_zero_figure_as_such_not_as_none(qm, fleet) -> None:
    """A job that ran for a minute read `0.00` GPU-hours beside its `0.04` dollars: a cell that
    rounds to nothing but is not nothing now reads `< 0.01`; a real zero still reads 0.00."""
    now = timezone.now().replace(second=0, microsecond=0)
    ml_job_ran(fleet, gpus=1, start=now - timedelta(minutes=30), held=timedelta(seconds=15), tokens_per_s=10.0,
               rolled_up_to=now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    ml_api = qm("showback", "--by", "team", "--window", "1h", "--json").json()["data"][0]["ml"]
    assert 0 < ml_api["gpuHours"] < 0.005

    r = qm("showback", "--by", "team", "--window", "1h")

    assert r.code == 0, r.err
    ml = table_row(r.out, "ml")
    assert ml["GPU-H ALLOC"] == "< 0.01", r.out
    assert ml["PREEMPTION WASTE $"] == "0.00", r.out
