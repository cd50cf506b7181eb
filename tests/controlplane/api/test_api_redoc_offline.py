"""`/api/redoc/` is documented as served "from our own static files (no CDN)", yet its page linked
Google Fonts (drf-spectacular's template) and the Redoc bundle fetched its footer logo from
cdn.redoc.ly: every visit asked two outside hosts, and on an air-gapped cluster waited on them.
The page now links nothing outside, and its Content-Security-Policy keeps images and fonts to
this server."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def test_the_redoc_page_links_nothing_outside_this_server(alice) -> None:
    r = alice.get("/api/redoc/")

    assert r.status_code == 200
    html = r.content.decode()
    assert "googleapis" not in html and "gstatic" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html), html
    policy = r["Content-Security-Policy"]
    assert "img-src 'self' data: blob:" in policy and "font-src 'self' data:" in policy


def test_swagger_ui_links_nothing_outside_either(alice) -> None:
    html = alice.get("/api/docs/").content.decode()

    assert not re.search(r'(src|href)="(https?:)?//', html), html
