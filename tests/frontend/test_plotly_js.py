"""plotly.js comes from the installed plotly package through our own route, never a CDN."""

from __future__ import annotations

import gzip

import pytest
from django.test import Client

from frontend.views.vendor import PLOTLY_JS, plotly_js_version

pytestmark = pytest.mark.django_db


def test_pages_load_plotly_from_our_own_versioned_route(client_for):
    html = client_for("alice").get("/").content.decode()
    assert f'src="/ui/vendor/plotly-{plotly_js_version()}.min.js"' in html
    assert "cdn" not in html.lower()


def test_plotly_js_is_the_packages_file_cached_for_a_year():
    response = Client().get(f"/ui/vendor/plotly-{plotly_js_version()}.min.js")
    assert response.status_code == 200
    assert response.content == PLOTLY_JS.read_bytes()
    assert "immutable" in response["Cache-Control"]
    assert response["Content-Type"].startswith("text/javascript")


def test_plotly_js_is_gzipped_for_clients_that_accept_it():
    response = Client().get(f"/ui/vendor/plotly-{plotly_js_version()}.min.js", HTTP_ACCEPT_ENCODING="gzip, br")
    assert response["Content-Encoding"] == "gzip"
    assert gzip.decompress(response.content) == PLOTLY_JS.read_bytes()


def test_another_version_of_plotly_js_is_not_found():
    assert Client().get("/ui/vendor/plotly-0.0.1.min.js").status_code == 404
