"""`qm list`, `qm history` and the history page name an array's tasks by their index, as the
jobs page does ("sweep [1]"), against a live server.

Found walking the demo as a researcher (5 Dec): `qm submit --array 0-9%3` then `qm list` gave ten
rows all named "arr", in no order that said which task was which (the list is newest first), while
the jobs page beside it read "arr [9]", "arr [8]", …; `qm history` likewise, and the history page
named them "arr" only too."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Job


def _names(out: str, ids: list[int]) -> dict[int, str]:
    """The NAME cell of each listed job, by its id (the row's first cell)."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 2 and cells[0].isdigit() and int(cells[0]) in ids and cells[1] == "sweep":
            rows[int(cells[0])] = " ".join(cells[1:3])
    return rows


def test_list_and_history_name_each_task_by_its_index(alice_qm, fleet) -> None:
    run = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2", "--hold", "--json")
    assert run.code == 0, run.err
    array_id, ids = run.json()["array_id"], run.json()["job_ids"]
    single = alice_qm("submit", "--name", "solo", "--gpus", "1", "--hold", "--parsable").out.strip()
    index = dict(Job.objects.filter(pk__in=ids).values_list("pk", "array_index"))

    listed = alice_qm("list")
    assert listed.code == 0, listed.err
    assert _names(listed.out, ids) == {pk: f"sweep [{index[pk]}]" for pk in ids}, listed.out
    assert f"{single}  solo " in listed.out  # a job of no array keeps its name alone

    assert alice_qm("cancel", "--array", array_id).code == 0
    history = alice_qm("history", "--state", "cancelled")
    assert history.code == 0, history.err
    assert _names(history.out, ids) == {pk: f"sweep [{index[pk]}]" for pk in ids}, history.out

    page = Client()
    page.force_login(get_user_model().objects.get(username="alice"))
    html = page.get("/history/?state=cancelled").content.decode()
    cells = {int(pk): re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", name)).strip()
             for pk, name in re.findall(r'<tr data-job="(\d+)">.*?<td class="job-name">(.*?)</td>', html, re.S)}
    assert cells == {pk: f"sweep [{index[pk]}]" for pk in ids}, cells
