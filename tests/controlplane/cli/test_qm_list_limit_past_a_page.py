"""`qm list --limit 1500` printed 1,000 rows: the API gives at most 1,000 a page and the CLI asked
for one page, so a larger --limit was cut to the API's largest page without a word of it being
cut. qm now reads page after page until it has the rows asked for or the list has no more."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _rows(out: str) -> list[str]:
    return [line for line in out.splitlines()[1:] if line.split() and line.split()[0].isdigit()]


def test_a_limit_past_the_apis_page_lists_that_many_jobs(alice_qm, fleet) -> None:
    f.finished_jobs_of(fleet.users["owner"], fleet.ml, 1204)

    r = alice_qm("list", "--all", "--limit", "1100")

    assert r.code == 0, r.err
    ids = [int(line.split()[0]) for line in _rows(r.out)]
    assert len(ids) == 1100 and len(set(ids)) == 1100 and ids == sorted(ids, reverse=True)  # newest first, none twice
    assert r.out.splitlines()[-1] == "(1–1100 of 1204; --offset 1100 for the next)"


def test_a_limit_past_the_end_lists_every_job_there_is(alice_qm, fleet) -> None:
    f.finished_jobs_of(fleet.users["owner"], fleet.ml, 1204)

    everything = alice_qm("list", "--all", "--limit", "5000")
    rest = alice_qm("list", "--all", "--limit", "1100", "--offset", "150")

    assert len(_rows(everything.out)) == 1204 and not everything.out.splitlines()[-1].startswith("(")
    assert len(_rows(rest.out)) == 1054 and rest.out.splitlines()[-1] == "(151–1204 of 1204)"


def test_json_of_a_limit_past_the_apis_page_holds_every_row_asked(alice_qm, fleet) -> None:
    f.finished_jobs_of(fleet.users["owner"], fleet.ml, 1204)

    page = alice_qm("list", "--all", "--limit", "1100", "--json").json()

    assert page["count"] == 1204 and len(page["results"]) == 1100
    assert len({j["id"] for j in page["results"]}) == 1100
    assert "offset=1100" in page["next"] and page["previous"] is None  # the rows after them; none before
