"""Every product page's outline as a screen reader lists it, read from the HTML the server sends
(the test client, no browser): a language, a title naming the page, one h1, headings that never
skip a level (h1 then h3 reads as a missing section), and every table's header cells `th` with a
scope, so a screen reader names a cell's column. Found on 6 Dec: no `th` had a scope; a job's page
went from its h1 to h3 (Why it waits, Progress, Cost so far) and a node's to h3 (Jobs on it,
Events). The browser's own view of the same, and more (contrast, keyboard, charts):
tests/frontend/test_pages_accessible_browser.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from controlplane.models import Job
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db

HEADING = re.compile(r"<h([1-6])\b[^>]*>", re.I)
TH = re.compile(r"<th\b[^>]*>", re.I)


def outline(html: str) -> list[str]:
    """What is wrong with the page's outline (the role rows' template left out: not on the page)."""
    html = re.sub(r"<template\b.*?</template>", "", html, flags=re.S)
    found = []
    if not re.search(r'<html lang="[a-z]{2}', html):
        found.append("no lang")
    levels = [int(m.group(1)) for m in HEADING.finditer(html)]
    if levels.count(1) != 1:
        found.append(f"{levels.count(1)} h1")
    found += [f"h{a} then h{b}" for a, b in zip([0, *levels], levels, strict=False) if b > a + 1]
    found += [f"unscoped {th}" for th in TH.findall(html) if not re.search(r'\bscope="(col|row)"', th)]
    return found


def test_every_page_has_a_title_one_h1_headings_in_order_and_scoped_header_cells(client_for: Any, submit_as: Any) -> None:
    submit_as("alice", name="runs", gpus=8)
    waiting = submit_as("alice", name="waits", gpus=96, gpus_per_node=8)
    run_cycle("test")
    running = Job.objects.get(name="runs")
    assert running.state == "running"
    pages = {
        "alice": [("/", "Overview"), ("/jobs/", "Jobs"), (f"/jobs/{waiting.pk}/", f"Job {waiting.pk}"),
                  (f"/jobs/{running.pk}/", f"Job {running.pk}"), ("/history/", "History"), ("/teams/", "Teams"),
                  ("/notifications/", "Notifications"), ("/what-if/", "What-if")],
        "finn": [("/showback/?window=24h", "Showback"), ("/showback/?window=24h&group_by=project", "Showback")],
        "admin": [("/nodes/", "Nodes"), ("/nodes/h100-01/", "Node h100-01"), ("/what-if/", "What-if")],
    }
    wrong = {}
    for who, visits in pages.items():
        client = client_for(who)
        for path, title in visits:
            response = client.get(path)
            assert response.status_code == 200, (who, path)
            html = response.content.decode()
            found = outline(html)
            if f"<title>{title} · Quartermaster</title>" not in html:
                found.append("title " + re.search(r"<title>(.*?)</title>", html, re.S).group(1))
            if found:
                wrong[f"{who} {path}"] = found[:6]
    login = Client().get("/accounts/login/").content.decode()
    if outline(login) or "<title>Log in · Quartermaster</title>" not in login:
        wrong["/accounts/login/"] = outline(login)
    assert not wrong, wrong
