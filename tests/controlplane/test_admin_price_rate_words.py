"""The admin's price rate pages say what finance types and reads: the price as "$ per GPU-hour",
its start in UTC, and, in the list, until when each rate is in force and which one is now.

Found on the admin's walk (5 Dec), in a browser in New York: the add page's "Effective from" said
nothing of its zone, only Django's "Note: You are 5 hours behind server time." (the maintenance
window form says "UTC; …"), so a price meant from local midnight started five hours early; the
price read "Usd per gpu hour"; the list gave each rate's start only, so which rate was in force
had to be worked out from the starts of every rate of the type and tier."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import PriceRate
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def test_the_add_page_says_the_price_and_its_start_in_utc(fleet, browser) -> None:
    html = browser.get("/admin/controlplane/pricerate/add/").content.decode()
    assert re.search(r'<label[^>]*for="id_usd_per_gpu_hour"[^>]*>\$ per GPU-hour:</label>', html), html[:3000]
    start = html[html.index('id="id_effective_from_0"'):]
    help_text = re.search(r'<div class="help"[^>]*>\s*(?:<div>)?(.*?)</div>', start, re.S).group(1)
    assert help_text.startswith("UTC, whatever your browser's time zone:"), help_text


def test_the_list_says_until_when_each_rate_is_in_force_and_which_is_now(fleet, browser) -> None:
    now = timezone.now().replace(microsecond=0)
    old = PriceRate.objects.get(gpu_type=fleet.h100)  # the fleet's H100 on-demand rate
    current = f.make_price_rate(fleet.h100, "3.0000", old.capacity_tier, now - timedelta(days=2))
    later = f.make_price_rate(fleet.h100, "2.0000", old.capacity_tier, now + timedelta(days=30))
    spot = f.make_price_rate(fleet.a100, "0.8000", "spot", now - timedelta(days=9))
    html = browser.get("/admin/controlplane/pricerate/").content.decode()

    def cells(rate: PriceRate) -> list[str]:
        row = re.search(rf'<tr>(?:(?!</tr>).)*?/pricerate/{rate.pk}/change/(?:(?!</tr>).)*</tr>', html, re.S).group(0)
        return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]

    assert "$ per GPU-hour<" in html and "In force until<" in html and "In force now<" in html
    assert cells(old)[-2:] == [f"{current.effective_from:%Y-%m-%d %H:%M:%S} UTC", "no: replaced"]
    assert cells(current)[-2:] == [f"{later.effective_from:%Y-%m-%d %H:%M:%S} UTC", "yes"]
    assert cells(later)[-2:] == ["no later rate", "not yet"]
    assert cells(spot)[-2:] == ["no later rate", "yes"]
