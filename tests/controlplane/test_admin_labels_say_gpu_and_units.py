"""The admin's labels and column headers spell the domain's words as admins write them.

Found on the admin's walk (6 Dec): Django derives a label from the field's name, so the quota
form asked for "Nominal gpus" of a "Gpu type", a node's "Cpus" and "Memory gb", a priority
class's "Grace period s", and every page was headed "Django administration"."""

from __future__ import annotations

import re

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

# A label word Django made from a field name: an acronym in lower case, or a unit suffix.
DERIVED = re.compile(r"\b(Gpu|gpu|Gpus|gpus|Cpu|cpu|Cpus|cpus|gb|Gb|Usd|usd|Id|id)\b|\bs:?$")
PAGES = ["gputype", "node", "pricerate", "quota", "priorityclass", "job", "team", "cohort",
         "maintenancewindow", "notificationhook", "allocation", "event", "schedulerlease"]


def _labels(html: str) -> list[str]:
    found = re.findall(r"<label[^>]*>(.*?)</label>", html, re.S)
    found += re.findall(r'<th scope="col"[^>]*>(.*?)</th>', html, re.S)
    return [re.sub(r"<[^>]+>", "", text).strip() for text in found]


def _pages(browser) -> list[str]:  # type: ignore[no-untyped-def]
    urls = []
    for model in PAGES:
        listing = browser.get(f"/admin/controlplane/{model}/")
        assert listing.status_code == 200, model
        urls.append(f"/admin/controlplane/{model}/")
        first = re.search(rf'href="(/admin/controlplane/{model}/\d+/change/)"', listing.content.decode())
        if first:
            urls.append(first.group(1))
        if browser.get(f"/admin/controlplane/{model}/add/").status_code == 200:
            urls.append(f"/admin/controlplane/{model}/add/")
    return urls


def test_no_admin_label_is_a_field_name_with_its_acronyms_in_lower_case(fleet, browser) -> None:
    f.make_job(fleet.ml, gpus=8)
    derived = {}
    for url in _pages(browser):
        for label in _labels(browser.get(url).content.decode()):
            if DERIVED.search(label):
                derived.setdefault(label, url)
    assert derived == {}, derived


def test_the_quota_and_node_forms_ask_for_gpus_and_units_by_name(fleet, browser) -> None:
    quota = _labels(browser.get("/admin/controlplane/quota/add/").content.decode())
    assert "GPU type:" in quota and "Nominal GPUs:" in quota, quota
    node = _labels(browser.get("/admin/controlplane/node/add/").content.decode())
    assert {"GPUs:", "CPUs:", "Memory (GB):"} <= set(node), node
    classes = _labels(browser.get("/admin/controlplane/priorityclass/add/").content.decode())
    assert "Grace period (s):" in classes, classes


def test_every_admin_page_is_headed_quartermaster(browser) -> None:
    html = browser.get("/admin/").content.decode()
    assert "Quartermaster administration" in html
    assert "Django administration" not in html
