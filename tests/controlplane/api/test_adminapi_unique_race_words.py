"""Two admins creating (or renaming to) the same name at once: the one whose insert the database
refuses is told so on the field, in the serializer's words, not with a 409 quoting the database.

Found by the API audit (4 Dec): twelve concurrent `POST cohorts/ {"name": "race-c1"}` on the demo
answered one 201, ten 400s on `name` ("cohort with this name already exists.") and one 409
`{"detail": "The database refused the change: UNIQUE constraint failed: controlplane_cohort.name",
"code": "conflict"}`: that request passed the serializer's checks before the winner committed,
and its insert hit the unique constraint. The answer named no field and quoted a table.

The race is made deterministic here: the rival row is written right after the request's own
checks passed (as the winning request's commit lands in the real race)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controlplane.api.serializers import fields
from controlplane.models import Cohort, Event, GpuType, Quota, Team

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture
def rival_after_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], Any]], None]]:
    """Arrange for `write()` to run once, right after the next request's serializer checks pass."""
    pending: list[Callable[[], Any]] = []
    checked = fields.ConstraintCheckedModelSerializer.validate

    def validate(self: Any, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = checked(self, attrs)
        if pending:
            pending.pop()()
        return attrs

    monkeypatch.setattr(fields.ConstraintCheckedModelSerializer, "validate", validate)
    yield pending.append


def test_a_create_that_loses_the_race_for_a_name_is_refused_on_name(fleet, admin, rival_after_checks) -> None:
    rival_after_checks(lambda: Cohort.objects.create(name="race-c1"))
    events = Event.objects.count()

    r = admin.post(f"{J}/cohorts/", {"name": "race-c1"}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["name"] and "already exists" in r.json()["errors"]["name"][0], r.json()
    assert "database" not in r.json()["detail"]
    assert Cohort.objects.filter(name="race-c1").count() == 1
    assert Event.objects.count() == events


def test_a_rename_that_loses_the_race_for_a_name_is_refused_on_name(fleet, admin, rival_after_checks) -> None:
    typo = GpuType.objects.create(name="B20O", memory_gb=192)  # nothing uses it yet: it may be renamed
    rival_after_checks(lambda: GpuType.objects.create(name="B200", memory_gb=192))

    r = admin.patch(f"{J}/gpu-types/{typo.pk}/", {"name": "B200"}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["name"] and "already exists" in r.json()["errors"]["name"][0], r.json()
    assert GpuType.objects.get(pk=typo.pk).name == "B20O"


def test_a_second_team_quota_written_meanwhile_is_named_as_a_sequential_one_is(fleet, admin, rival_after_checks) -> None:
    team = Team.objects.create(name="newcomers")
    rival_after_checks(lambda: Quota.objects.create(team=team, gpu_type=fleet.a100, nominal_gpus=2))

    r = admin.post(f"{J}/quotas/", {"team": "newcomers", "gpu_type": "A100-40GB", "nominal_gpus": 4}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["gpu_type"], r.json()
    assert "already has a quota for A100-40GB" in r.json()["errors"]["gpu_type"][0]
    assert [q.nominal_gpus for q in team.quotas.all()] == [2]
