"""In Chromium: the sentence under the Nodes page's "Schedule a window" form names each field at
fault by the form's own label, as the submit form's does. Until 7 Dec it repeated the API's
sentence under the marked fields: "Invalid request. start_at: give when the maintenance begins."
under a form that asks *From (UTC)*, and "duration_s: …" under one that asked *For (hours)* (now
*Length (hours)*: a field's label heads its clause with the unit left out, as the submit form's
"Runtime limit: 200 h is beyond …", and "For: …" said nothing)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import MaintenanceWindow
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

API_WORDS = ("start_at", "duration_s", "end_at", "Invalid request")


def test_the_maintenance_forms_sentence_names_its_labels(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    admin.open("/nodes/")
    page = admin.page
    page.fill('#maintenance-form [data-field="nodes"]', "h100-01")
    page.fill('#maintenance-form [data-field="reason"]', "firmware upgrade")
    verdict = page.locator("#maintenance-form [data-verdict]")

    page.click("#maintenance-form button[type=submit]")

    expect(verdict).to_have_text("Fix the fields marked: From (UTC): give when the maintenance begins.",
                                 timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator('#maintenance-form [data-error-for="start_at"]')).to_have_text(
        "give when the maintenance begins")
    admin.expect_refusal("/api/v1/maintenance-windows/", 400)

    page.fill('#maintenance-form [data-field="start_at"]', "2030-01-01T10:00")
    page.fill('#maintenance-form [data-field="duration_s"]', "100000000")
    page.click("#maintenance-form button[type=submit]")

    expect(verdict).to_contain_text("Fix the fields marked: Length: 4166666 d 16 h long: a window lasts at most 14 d",
                                    timeout=ANSWER_TIMEOUT_MS)
    said = verdict.inner_text()
    assert not [word for word in API_WORDS if word in said], said
    admin.expect_refusal("/api/v1/maintenance-windows/", 400)
    assert not MaintenanceWindow.objects.exists()


def test_a_refusal_no_field_shows_keeps_the_apis_sentence(session: Any) -> None:  # noqa: F811
    """Nothing marked (a window on no node and no pool is the API's whole-request refusal, or a
    field the form has no slot for): the API's own words stay, so nothing is left unsaid."""
    admin = session("admin")
    admin.open("/nodes/")
    page = admin.page
    page.fill('#maintenance-form [data-field="start_at"]', "2030-01-01T10:00")
    page.fill('#maintenance-form [data-field="reason"]', "firmware upgrade")

    page.click("#maintenance-form button[type=submit]")

    verdict = page.locator("#maintenance-form [data-verdict]")
    expect(verdict).not_to_have_text("", timeout=ANSWER_TIMEOUT_MS)
    expect(verdict).not_to_have_text("Scheduling…", timeout=ANSWER_TIMEOUT_MS)
    assert "node" in verdict.inner_text().lower()
    admin.expect_refusal("/api/v1/maintenance-windows/", 400)
    assert not MaintenanceWindow.objects.exists()
