"""An admin finds who changed what afterwards: the events list searches the words of the trail
(message, actor, reason) beside the filter by kind.

Found on the demo: to learn who lowered vision's H100 quota, the events list offered only a
kind filter and pages of 100 events, with the job events of a busy fleet in between; there was
no search box.
"""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event
from controlplane.services import quotas

pytestmark = pytest.mark.django_db


def _messages(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", m).strip() for m in re.findall(r'<td class="field-message_text">(.*?)</td>', html, re.S)]


def test_the_events_list_searches_the_trail(fleet, browser) -> None:
    for quota in fleet.ml.quotas.all():
        quotas.record_quota_change(quota, "changed", quotas.quota_record(quota), "user:carol")
    for quota in fleet.vision.quotas.all():
        quotas.record_quota_change(quota, "changed", quotas.quota_record(quota), "user:dave")
    for _ in range(3):
        Event.objects.create(created_at=timezone.now(), kind=EventKind.JOB_SUBMITTED, actor="user:bob", reason="Submitted",
                             message="Submitted by bob: 8 GPUs of H100-80GB")

    html = browser.get("/admin/controlplane/event/", {"q": "vision", "kind__exact": EventKind.QUOTA_CHANGED}).content.decode()
    assert _messages(html) == ["Quota of vision on H100-80GB changed: saved unchanged"]

    html = browser.get("/admin/controlplane/event/", {"q": "carol"}).content.decode()
    assert _messages(html) == ["Quota of ml on H100-80GB changed: saved unchanged"]

    html = browser.get("/admin/controlplane/event/", {"q": "Submitted"}).content.decode()
    assert len(_messages(html)) == 3
