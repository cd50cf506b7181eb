"""The admin's quota fields say what an empty limit and a 0 mean, on the quota page and on the
team page's quota rows: the list reads an empty limit as "no limit", while 0 borrows or lends
nothing, the opposite.

Found on the admin's walk (5 Dec): the quota form showed "Borrowing limit" and "Lending limit"
as bare boxes, vision's lending limit an empty one, with no word of what empty means; an admin
typing 0 for "no limit" stops the team borrowing (or lending) altogether."""

from __future__ import annotations

import html as html_lib
import re

import pytest

from controlplane.models import Quota

pytestmark = pytest.mark.django_db

SAID = {
    "borrowing_limit": "Empty: no limit. 0: it borrows none.",
    "lending_limit": "Empty: all of it. 0: it lends none.",
}


def test_the_quota_page_says_what_an_empty_limit_and_0_mean(fleet, browser) -> None:
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    for path in ("/admin/controlplane/quota/add/", f"/admin/controlplane/quota/{quota.pk}/change/"):
        page = html_lib.unescape(browser.get(path).content.decode())
        for field, words in SAID.items():
            after = page[page.index(f'id="id_{field}"'):]
            help_text = re.search(r'<div class="help"[^>]*>\s*(?:<div>)?(.*?)</div>', after, re.S).group(1)
            assert words in help_text, (path, field, help_text)
        nominal = page[page.index('id="id_nominal_gpus"'):]
        assert "guaranteed" in re.search(r'<div class="help"[^>]*>\s*(?:<div>)?(.*?)</div>', nominal, re.S).group(1)


def test_the_team_pages_quota_rows_say_it_too(fleet, browser) -> None:
    page = html_lib.unescape(browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/change/").content.decode())
    quotas = page[page.index('id="quotas-group"'):]
    heads = quotas[:quotas.index("</thead>")]
    for words in SAID.values():
        assert words in heads, heads[-2000:]
