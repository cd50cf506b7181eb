from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_openapi_schema_generates_without_warnings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/v1/jobs/" in text and "JobStateEnum" in text and "NodeStateEnum" in text
