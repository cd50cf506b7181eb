"""Text is given as text, and holds nothing that hides what it says (services/plain_text.py), in
every text field the API takes: a 400 naming the field and the problem, and nothing written.

Found 7 Dec: a team's, project's, cohort's or priority class's `description` and a GPU type's
`name` took an escape sequence, a bell or a right-to-left override (only some names were
checked, each in its own words, none saying which character or where); `{"name": 12345}` made a
team named "12345" and `1e20` one named "1e+20" (DRF's CharField reads a number as its digits),
and a job file's `name: 1.10` reached the API as the number 1.1, stored as "1.1"."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import get_resolver
from rest_framework import serializers
from rest_framework.test import APIClient

from controlplane.models import Cohort, GpuType, Job, PriorityClass, Project, Team
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _post(client: APIClient, path: str, body: dict[str, Any]) -> Any:
    # json.dumps, not format="json": a float such as 1e20 is sent as written
    return client.post(f"{J}/{path}", data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("path", "body", "field"), [
    ("teams/", {"name": "newteam"}, "description"),
    ("projects/", {"team": "ml", "name": "newproject"}, "description"),
    ("cohorts/", {"name": "newcohort"}, "description"),
    ("priority-classes/", {"name": "newclass", "value": 5}, "description"),
    ("gpu-types/", {"memory_gb": 80}, "name"),
], ids=["team", "project", "cohort", "priority-class", "gpu-type"])
@pytest.mark.parametrize(("text", "said"), [
    ("abc\x07d", "contains a control character (U+0007) at position 4"),
    ("red\x1b[31m", "contains a control character (U+001B, an escape) at position 4"),
    ("x\x7f", "contains a control character (U+007F) at position 2"),
    ("next\x85line", "contains a control character (U+0085, a next line) at position 5"),
    ("ab\u202ecd", "contains a bidirectional control (U+202E) at position 3"),
    ("iso\u2066late", "contains a bidirectional control (U+2066) at position 4"),
    ("one\u2028two", "contains a line separator (U+2028) at position 4"),
    ("c\rr", "contains a control character (U+000D, a carriage return) at position 2"),
], ids=["bell", "escape", "del", "next-line", "rlo", "isolate", "line-separator", "carriage-return"])
def test_a_text_with_a_hiding_character_is_a_400_naming_the_field_the_character_and_where(
        admin: APIClient, fleet: Fleet, path: str, body: dict[str, Any], field: str, text: str, said: str) -> None:
    models = (Team, Project, Cohort, PriorityClass, GpuType)
    before = [m.objects.count() for m in models]

    r = _post(admin, path, {**body, field: text})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {field: [said]}, r.json()
    assert [m.objects.count() for m in models] == before


@pytest.mark.parametrize(("path", "body"), [
    ("teams/", {"name": "newteam"}), ("projects/", {"team": "ml", "name": "newproject"}),
    ("cohorts/", {"name": "newcohort"}), ("priority-classes/", {"name": "newclass", "value": 5}),
], ids=["team", "project", "cohort", "priority-class"])
def test_a_description_may_have_several_lines_and_tabs(admin: APIClient, fleet: Fleet, path: str,
                                                       body: dict[str, Any]) -> None:
    r = _post(admin, path, {**body, "description": "Training runs.\n\tOwner: alice"})

    assert r.status_code == 201, r.json()
    assert r.json()["description"] == "Training runs.\n\tOwner: alice"


@pytest.mark.parametrize(("path", "body", "field"), [
    ("jobs/", {"gpus": 1}, "name"),
    ("gpu-types/", {"memory_gb": 80}, "name"),
    ("nodes/", {"name": "n-new", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 64, "memory_gb": 512,
                "leaf_switch": "leaf-1", "spine": "spine-1"}, "pool"),
], ids=["job", "gpu-type", "node-pool"])
@pytest.mark.parametrize(("text", "said"), [
    ("two\nlines", "contains a control character (U+000A, a new line) at position 4: it is one line of text"),
    ("tab\there", "contains a control character (U+0009, a tab) at position 4: it is one line of text"),
], ids=["new-line", "tab"])
def test_a_name_is_one_line_without_tabs(admin: APIClient, fleet: Fleet, path: str, body: dict[str, Any],
                                         field: str, text: str, said: str) -> None:
    r = _post(admin, path, {**body, field: text})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"][field] == [said], r.json()


def test_the_position_counts_what_was_sent_spaces_trimmed_before_it_included(alice: APIClient, fleet: Fleet) -> None:
    r = _post(alice, "jobs/", {"name": "  ab\x07", "gpus": 1})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"name": ["contains a control character (U+0007) at position 5"]}, r.json()
    assert r.json()["detail"].startswith("Invalid request. name: contains a control character (U+0007)"), r.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize(("path", "body", "field"), [
    ("teams/", {}, "name"),
    ("teams/", {"name": "numbers"}, "description"),
    ("projects/", {"team": "ml"}, "name"),
    ("cohorts/", {}, "name"),
    ("priority-classes/", {"value": 5}, "name"),
    ("gpu-types/", {"memory_gb": 80}, "name"),
    ("jobs/", {"gpus": 1}, "name"),
    ("nodes/", {"name": "n-new", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 64, "memory_gb": 512,
                "leaf_switch": "leaf-1", "spine": "spine-1"}, "pool"),
], ids=["team", "team-description", "project", "cohort", "priority-class", "gpu-type", "job", "node-pool"])
@pytest.mark.parametrize(("given", "kind"), [(12345, "a number"), (1e20, "a number"), (1.1, "a number"),
                                             (True, "a boolean (true)")], ids=["12345", "1e20", "1.1", "true"])
def test_a_number_or_a_boolean_where_text_goes_is_a_400_saying_so(admin: APIClient, fleet: Fleet, path: str,
                                                                   body: dict[str, Any], field: str, given: Any,
                                                                   kind: str) -> None:
    models = (Team, Project, Cohort, PriorityClass, GpuType, Job)
    before = [m.objects.count() for m in models]

    r = _post(admin, path, {**body, field: given})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"][field] == [f"must be text, got {kind}"], r.json()
    assert [m.objects.count() for m in models] == before


def test_digits_given_as_text_still_name_a_team(admin: APIClient, fleet: Fleet) -> None:
    r = _post(admin, "teams/", {"name": "12345", "description": "1.10"})

    assert r.status_code == 201, r.json()
    assert Team.objects.get(name="12345").description == "1.10"


@pytest.mark.parametrize(("path", "body", "field"), [
    ("jobs/{job}/hold/", {}, "reason"),
    ("nodes/{node}/cordon/", {}, "reason"),
    ("maintenance-windows/", {"nodes": ["h100-1"], "start_at": "2099-01-01T00:00:00Z", "duration_s": 3600},
     "reason"),
], ids=["hold", "cordon", "maintenance"])
def test_a_reason_is_text_of_one_line_in_the_same_words(admin: APIClient, fleet: Fleet, path: str,
                                                        body: dict[str, Any], field: str) -> None:
    from tests.controlplane import factories as f
    job = f.make_job(fleet.ml, fleet.research, name="waiting")
    url = path.format(job=job.pk, node=fleet.nodes[1].pk)

    bell = _post(admin, url, {**body, field: "disk\x07full"})
    number = _post(admin, url, {**body, field: 42})

    assert bell.status_code == 400 and bell.json()["errors"][field] == [
        "contains a control character (U+0007) at position 5"], bell.json()
    assert number.status_code == 400 and number.json()["errors"][field] == ["must be text, got a number"], number.json()


def _body_serializer_classes() -> set[type[serializers.BaseSerializer]]:
    """The serializers that read a request's body: those refusing unknown fields or a PUT's
    missing ones (every body of the API but one), and the maintenance windows', which says
    unknown fields in its own words. The agent's protocol is not among them: its names are the
    agent registration's rule (services/agent_protocol.py), and a log's text is what a process
    wrote, kept as written."""
    from controlplane.api.maintenance import MaintenanceWindowWriteSerializer
    from controlplane.api.serializers.fields import PutReplacesWholeMixin, StrictFieldsMixin

    get_resolver().url_patterns  # every view (and so every serializer) of the API imported

    def below(cls: type) -> set[type]:
        return {c for sub in cls.__subclasses__() for c in {sub, *below(sub)}}
    return {c for c in below(serializers.Serializer) if c.__module__.startswith("controlplane.")
            and (issubclass(c, StrictFieldsMixin | PutReplacesWholeMixin) or c is MaintenanceWindowWriteSerializer)}


def test_every_text_field_of_a_body_reads_text_by_the_one_rule() -> None:
    from controlplane.api.serializers.fields import TextField

    plain = []
    classes = _body_serializer_classes()
    for cls in classes:
        try:
            fields = cls().fields
        except (AssertionError, TypeError):  # a base without Meta, a list without its child
            continue
        for name, field in fields.items():
            if field.read_only:
                continue
            for one in (field, getattr(field, "child", None)):
                if isinstance(one, serializers.CharField) and not isinstance(one, TextField):
                    plain.append(f"{cls.__module__}.{cls.__name__}.{name}")
    assert len(classes) > 20
    assert not plain, plain


# ------------------------------------------------------------------------- repeated values

def test_a_hook_given_one_event_twice_is_a_400_naming_it(alice: APIClient, fleet: Fleet) -> None:
    from controlplane.models import NotificationHook

    r = _post(alice, "notification-hooks/", {"url": "https://hooks.slack.com/services/T0/B0/x",
                                             "events": ["started", "failed", "started"]})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"events": ["'started' is given twice: give each event once"]}, r.json()
    assert not NotificationHook.objects.exists()


@pytest.mark.parametrize(("spec", "said"), [
    ("0-3,2", "index 2 is given twice, in 0-3 and in 2: give each index once"),
    ("1,1", "index 1 is given twice: give each index once"),
    ("0-9:3,6-7", "index 6 is given twice, in 0-9:3 and in 6-7: give each index once"),
], ids=["range-and-index", "index-twice", "stepped"])
def test_an_array_giving_an_index_twice_is_a_400_naming_it(alice: APIClient, fleet: Fleet, spec: str,
                                                          said: str) -> None:
    r = _post(alice, "job-arrays/", {"name": "sweep", "gpus": 1, "array": spec})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"array": [said]}, r.json()
    assert not Job.objects.exists()


def test_ranges_that_touch_without_sharing_an_index_are_taken(alice: APIClient, fleet: Fleet) -> None:
    r = _post(alice, "job-arrays/", {"name": "sweep", "gpus": 1, "array": "0-2,3-4,5,6-12:6"})

    assert r.status_code == 201, r.json()
    assert r.json()["indices"] == [0, 1, 2, 3, 4, 5, 6, 12]


@pytest.mark.parametrize(("body", "field", "said"), [
    ({"command": "echo hi\x1b]0;owned\x07"}, "command", "contains a control character (U+001B, an escape) at position 8"),
    ({"env": {"A": "x\x07"}}, "env.A", "contains a control character (U+0007) at position 2"),
    ({"gpu_type": "H100\u202e"}, "gpu_type", "contains a bidirectional control (U+202E) at position 5"),
], ids=["command", "env", "gpu-type"])
def test_a_submit_refuses_them_in_every_text_field_on_both_of_its_paths(alice: APIClient, fleet: Fleet,
                                                                        body: dict[str, Any], field: str,
                                                                        said: str) -> None:
    from controlplane.api import serializers as s
    whole = {"name": "train", "gpus": 1, **body}

    r = _post(alice, "jobs/", whole)

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"][field] == [said], r.json()
    assert s.plain_submit_request(whole, s.JobSubmitSerializer) is None  # the fast path leaves it to the serializer
    assert not Job.objects.exists()


def test_a_command_and_an_environment_value_may_have_several_lines_and_tabs(alice: APIClient, fleet: Fleet) -> None:
    from controlplane.api import serializers as s
    body = {"name": "train", "gpus": 1, "command": "cd /data\n\tpython train.py", "env": {"KEY": "line 1\nline 2"}}

    r = _post(alice, "jobs/", body)

    assert r.status_code == 201, r.json()
    job = Job.objects.get()
    assert job.command == "cd /data\n\tpython train.py" and job.env == {"KEY": "line 1\nline 2"}
    assert s.plain_submit_request(body, s.JobSubmitSerializer) is not None


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "train", "gpus": 1, "gpu_types": ["H100-80GB", "A100-40GB", "H100-80GB"]}, "gpu_types"),
    ({"name": "gang", "gpus": 3, "roles": [
        {"name": "learner", "count": 1, "gpus_per_member": 2},
        {"name": "rollout", "count": 1, "gpus_per_member": 1, "gpu_types": ["H100-80GB", "H100-80GB"]}]},
     "roles.1.gpu_types"),
], ids=["job", "role"])
def test_a_submit_giving_a_gpu_type_twice_is_a_400_naming_it(alice: APIClient, fleet: Fleet, body: dict[str, Any],
                                                            field: str) -> None:
    # until 7 Dec the two were collapsed into one: the job read back with a shorter list than sent
    r = _post(alice, "jobs/", {"team": "ml", **body})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {field: ["'H100-80GB' is given twice: give each type once"]}, r.json()
    assert not Job.objects.exists()


def test_a_change_giving_a_gpu_type_twice_is_a_400_naming_it(alice: APIClient, fleet: Fleet) -> None:
    job = _post(alice, "jobs/", {"team": "ml", "name": "train", "gpus": 1, "hold": True,
                                 "gpu_types": ["A100-40GB"]}).json()

    r = alice.patch(f"{J}/jobs/{job['id']}/", data=json.dumps({"gpu_types": ["H100-80GB", "H100-80GB"]}),
                    content_type="application/json")

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"gpu_types": ["'H100-80GB' is given twice: give each type once"]}, r.json()
    assert Job.objects.get(pk=job["id"]).gpu_types == ["A100-40GB"]


def test_a_team_given_one_priority_class_twice_is_a_400_naming_it(admin: APIClient, fleet: Fleet) -> None:
    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", data=json.dumps({"priority_classes": ["research", "research"]}),
                    content_type="application/json")

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"priority_classes": ["'research' is given twice: give each name once"]}, r.json()
    assert not Team.objects.get(pk=fleet.ml.pk).priority_classes.exists()


def test_an_array_requeue_given_one_state_twice_is_a_400_naming_it(alice: APIClient, fleet: Fleet) -> None:
    array = _post(alice, "job-arrays/", {"team": "ml", "name": "sweep", "gpus": 1, "array": "0-1"}).json()
    Job.objects.filter(array_id=array["array_id"]).update(state="failed")

    r = _post(alice, f"job-arrays/{array['array_id']}/requeue/", {"states": ["failed", "failed"]})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"states": ["'failed' is given twice: give each state once"]}, r.json()
    assert set(Job.objects.filter(array_id=array["array_id"]).values_list("state", flat=True)) == {"failed"}


def test_a_maintenance_window_naming_a_node_twice_is_a_400_naming_it(admin: APIClient, fleet: Fleet) -> None:
    from controlplane.models import MaintenanceWindow

    r = _post(admin, "maintenance-windows/", {"nodes": ["h100-3", "h100-1", " h100-3"], "duration_s": 3600,
                                              "start_at": "2030-01-01T00:00:00Z", "reason": "firmware"})

    assert r.status_code == 400, r.content[:300]
    assert r.json()["errors"] == {"nodes": ["'h100-3' is given twice: give each node once"]}, r.json()
    assert not MaintenanceWindow.objects.exists()
