"""`qm showback` prints every figure of the page's table: until 6 Dec it left out $ / productive
GPU-h and the useful tokens, so the price per million tokens it printed could not be checked
against anything, and the page's $ / productive GPU-h had no qm column to compare with."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.controlplane.cli.showback_table import ml_job_ran, table_columns, table_row


def test_qm_showback_says_the_price_of_a_productive_gpu_hour_and_the_useful_tokens(qm, fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    ml_job_ran(fleet, gpus=8, start=now - timedelta(hours=2), held=timedelta(hours=1), tokens_per_s=1000.0,
               rolled_up_to=now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    report = qm("showback", "--by", "team", "--window", "1d", "--json").json()
    api = report["data"][0]["ml"]
    assert api["usefulTokens"] > 0 and api["usdPerProductiveGpuHour"] > 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    columns = table_columns(r.out)
    assert columns.index("$/GPU-H") + 1 == columns.index("$/PRODUCTIVE GPU-H")
    assert columns.index("USEFUL TOKENS") + 1 == columns.index("$/1M TOKENS")
    ml = table_row(r.out, "ml")
    assert ml["$/PRODUCTIVE GPU-H"] == f"{api['usdPerProductiveGpuHour']:,.2f}"
    assert ml["USEFUL TOKENS"] == f"{api['usefulTokens']:,}"  # whole tokens, thousands separated
    total = table_row(r.out, "TOTAL")
    assert total["USEFUL TOKENS"] == f"{report['totals']['usefulTokens']:,}"
    # capacity no job held has no tokens, as it has no GPU-hours of a job: no 0 to add up
    assert table_row(r.out, "__idle__")["USEFUL TOKENS"] == "-"
