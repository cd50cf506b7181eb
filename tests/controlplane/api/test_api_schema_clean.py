from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_openapi_schema_generates_without_warnings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/v1/jobs/" in text and "JobStateEnum" in text and "NodeStateEnum" in text


@pytest.mark.django_db
def test_openapi_schema_names_the_query_parameters_the_lists_take() -> None:
    """A parameter a list takes but its schema leaves out is one the schema fuzz never tries:
    the hooks list's `user` (admins: one user's hooks) was such a one."""
    from drf_spectacular.generators import SchemaGenerator

    from controlplane.api.notification_hooks import NotificationHookViewSet

    schema = SchemaGenerator().get_schema(request=None, public=True)
    listed = {p["name"] for p in schema["paths"]["/api/v1/notification-hooks/"]["get"]["parameters"]}
    assert NotificationHookViewSet.query_parameters - {"format"} <= listed
