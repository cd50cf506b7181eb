"""DELETE of a record that history protects says what protects it and how to retire it, for the
record deleted: a priority class, a node, a project, not only a team.

Found by QA as a platform engineer: `DELETE priority-classes/N/` answered "It has accounting
history (…); Remove its members and quotas to retire it instead." (a priority class has
neither); `DELETE nodes/N/` "Still in use by 1:3 g59, 1:4 g59, …; remove or move those first."
(the GPUs of past and running jobs' allocations, which cannot be removed), and `DELETE
projects/N/` "Still in use by job 1 notebook-1, …; remove or move those first." (jobs are never
deleted)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Node, PriorityClass, Project
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _ran_on(fleet: Any, node: Node, **job: Any) -> None:
    now = timezone.now()
    done = f.make_job(fleet.ml, state=JobState.SUCCEEDED, **job)
    allocation = Allocation.objects.create(job=done, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in range(2))


def test_a_priority_class_with_jobs_says_how_to_retire_a_class(fleet, admin) -> None:
    old = f.make_priority_class("legacy", 50)
    f.make_job(fleet.ml, old, state=JobState.SUCCEEDED)

    r = admin.delete(f"{J}/priority-classes/{old.pk}/")

    assert r.status_code == 409
    detail = r.json()["detail"]
    assert detail.startswith("Priority class legacy has accounting history"), detail
    assert "1 job" in detail and "cannot be deleted" in detail
    # No team's default: nothing to do but keep it (it was told to give such teams another).
    assert detail.endswith("It is no team's default class; it stays for the reports."), detail
    assert "members" not in detail and "remove or move" not in detail
    assert PriorityClass.objects.filter(pk=old.pk).exists()


def test_a_priority_class_with_jobs_that_teams_default_to_names_those_teams(fleet, admin) -> None:
    old = f.make_priority_class("legacy", 50)
    f.make_job(fleet.ml, old, state=JobState.SUCCEEDED)
    fleet.ml.default_priority_class = old
    fleet.ml.save(update_fields=["default_priority_class"])

    r = admin.delete(f"{J}/priority-classes/{old.pk}/")

    assert r.status_code == 409
    assert r.json()["detail"].endswith("To retire it, give team ml, whose default it is, another default class (its "
                                       "default_priority_class: PATCH teams/ID/)."), r.json()["detail"]
    assert PriorityClass.objects.filter(pk=old.pk).exists()


def test_a_node_that_ran_jobs_says_drain_not_remove(fleet, admin) -> None:
    node = fleet.nodes[2]
    _ran_on(fleet, node)

    r = admin.delete(f"{J}/nodes/{node.pk}/")

    assert r.status_code == 409
    detail = r.json()["detail"]
    assert detail.startswith(f"Node {node.name} has accounting history"), detail
    assert "2 allocated GPUs of jobs" in detail and "cannot be deleted" in detail
    assert "drain it" in detail and f"retire it once it is cordoned (POST nodes/{node.pk}/retire/)" in detail
    assert "a pool of its own" not in detail  # the workaround before the retired state
    assert ":0 g" not in detail  # not the allocation GPU rows' own names ("1:0 g7")
    assert "remove or move" not in detail
    assert Node.objects.filter(pk=node.pk).exists()


def test_a_project_with_jobs_says_its_jobs_are_kept(fleet, admin) -> None:
    f.make_job(fleet.ml, project=fleet.llm, state=JobState.SUCCEEDED)
    f.make_job(fleet.ml, project=fleet.llm)

    r = admin.delete(f"{J}/projects/{fleet.llm.pk}/")

    assert r.status_code == 409
    detail = r.json()["detail"]
    assert detail.startswith("Project llm has accounting history"), detail
    assert "2 jobs" in detail and "remove or move" not in detail
    assert Project.objects.filter(pk=fleet.llm.pk).exists()


def test_a_gpu_type_held_only_by_settings_still_lists_them(fleet, admin) -> None:
    r = admin.delete(f"{J}/gpu-types/{fleet.h100.pk}/")

    assert r.status_code == 409
    detail = r.json()["detail"]
    assert detail.startswith("Still in use by"), detail
    assert "h100-0" in detail and "remove or move those first" in detail
    # four nodes and two quotas: the first five by name, and how many more
    assert detail == ("Still in use by h100-0, h100-1, h100-2, h100-3, ml × H100-80GB: 16 and 1 more; "
                      "remove or move those first.")


def test_a_record_without_history_is_deleted(fleet, admin) -> None:
    spare = f.make_priority_class("spare", 5)

    assert admin.delete(f"{J}/priority-classes/{spare.pk}/").status_code == 204
    assert not PriorityClass.objects.filter(pk=spare.pk).exists()
