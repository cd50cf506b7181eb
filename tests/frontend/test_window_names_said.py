"""A `?window=` the overview, teams and node pages cannot read is said on the page, as showback
says one, and the default shown; it was silently replaced by the default (demo walk, 5 Dec:
`/?window=bogus` showed the last 24 hours unsaid). The API's endpoints that take `window` refuse
one with a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db: Any) -> Client:
    team = f.make_team("ml")
    gpu = f.make_gpu_type("H100-80GB")
    f.make_node(gpu, name="h100-01")
    client = Client()
    client.force_login(f.make_user("alice", team=team))
    return client


@pytest.mark.parametrize("path, shown", [("/", "last 24 hours"), ("/teams/", "last 7 days"),
                                         ("/nodes/h100-01/", "last 24 hours")])
def test_a_window_the_page_cannot_read_is_said(alice: Client, path: str, shown: str) -> None:
    html = alice.get(path, {"window": "bogus"}).content.decode()
    assert ('<p class="error" role="alert" id="window-error" data-error-for="window">window: &#x27;bogus&#x27; is '
            f"not a window this page shows: use one of 1h, 6h, 24h, 7d, 30d; showing the {shown}.</p>") in html
    assert f'selected>{shown}</option>' in html
    for fine in ({"window": "6h"}, {}, {"window": ""}):
        assert 'id="window-error"' not in alice.get(path, fine).content.decode(), fine


@pytest.mark.parametrize("path", ["/api/v1/showback/", "/api/v1/metrics/utilization/"])
def test_the_apis_windows_refuse_one_they_cannot_read_naming_it(alice: Client, path: str) -> None:
    response = alice.get(path, {"window": "bogus"})
    assert response.status_code == 400
    assert "window" in response.json()["errors"]
