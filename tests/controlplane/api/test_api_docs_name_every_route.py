"""docs/api.md names every route the API serves: a route added without a line in the docs
fails here, so the reference a user reads stays the whole API (the OpenAPI schema at
/api/schema/ is generated from the code and cannot drift; the prose can)."""

from __future__ import annotations

import re
from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def _normalised(path: str) -> str:
    """A route as the docs write it: relative to /api/v1/, every parameter as {…}."""
    return re.sub(r"\{[^}]+\}", "{…}", path.removeprefix("/api/v1/"))


def test_api_docs_name_every_route_the_schema_serves():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    routes = sorted({_normalised(path) for path in schema["paths"] if path.startswith("/api/v1/")})
    assert len(routes) > 50  # the whole API, not an empty schema
    doc = _normalised(DOC.read_text())
    unnamed = [route for route in routes
               if not re.search(r"`(?:(?:GET|POST|PUT|PATCH|DELETE) )?" + re.escape(route), doc)]
    assert unnamed == [], f"routes docs/api.md does not name (as `route` or `GET route`): {unnamed}"
