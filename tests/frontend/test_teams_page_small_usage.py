"""The teams page's decayed usage: a small non-zero amount reads "< 0.01 GPU-h", as `qm sshare`
says it; one decimal said "0.0 GPU-h", the same as no usage at all."""

from __future__ import annotations

import pytest

from controlplane.models import Team

pytestmark = pytest.mark.django_db


def test_a_small_decayed_usage_is_not_said_as_none(client_for) -> None:
    Team.objects.filter(name="vision").update(decayed_gpu_seconds=18.0)   # 0.005 GPU-hours
    Team.objects.filter(name="language").update(decayed_gpu_seconds=0.0)

    page = client_for("admin").get("/teams/").content.decode()

    assert '<td title="GPU-hours, decayed with the fair-share half-life">&lt; 0.01 GPU-h</td>' in page
    assert '<td title="GPU-hours, decayed with the fair-share half-life">0 GPU-h</td>' in page
    assert "0.0 GPU-h" not in page
