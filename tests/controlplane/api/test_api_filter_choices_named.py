"""A choice query parameter given a value it does not take (`?state=bogus`, `?ordering=nope`) is
a 400 that lists the values it takes: Django's "Select a valid choice. bogus is not one of the
available choices." named the parameter but left the user guessing (found walking the
researcher's journey: `qm list --state runing`, `qm list --sort age`)."""

from __future__ import annotations

import pytest

from controlplane.choices import WAITING_CODES, EventKind, JobState, NodeState, WorkloadClass

pytestmark = pytest.mark.django_db
J = "/api/v1"


def refusal(client, path: str, query: dict[str, object]) -> dict[str, list[str]]:
    """The field errors of a GET the API refuses (a 400)."""
    r = client.get(f"{J}/{path}", query)
    assert r.status_code == 400, r.content
    return r.json()["errors"]


def test_an_unknown_job_state_lists_the_states(fleet, alice) -> None:
    errors = refusal(alice, "jobs/", {"state": ["pending", "runing"]})

    assert list(errors) == ["state"]
    assert errors["state"] == [f"'runing' is not a valid choice; choose one of: {', '.join(s.value for s in JobState)}."]


def test_an_unknown_workload_lists_the_workloads(fleet, alice) -> None:
    errors = refusal(alice, "jobs/", {"workload": "gaming"})

    assert errors["workload"] == [f"'gaming' is not a valid choice; choose one of: {', '.join(w.value for w in WorkloadClass)}."]


def test_an_unknown_sort_field_lists_the_fields_once_each(fleet, alice) -> None:
    message = refusal(alice, "jobs/", {"ordering": "-age"})["ordering"][0]

    assert message.startswith("'-age' is not a field this list sorts by; choose one of: id, submitted_at, gpus, queue_position, ")
    assert message.endswith(" (-FIELD descends).")
    assert "-id" not in message


@pytest.mark.parametrize(("path", "name", "choices"), [
    ("nodes/", "state", NodeState), ("events/", "kind", EventKind),
])
def test_other_lists_name_their_choices_too(fleet, admin, path, name, choices) -> None:
    errors = refusal(admin, path, {name: "nonsense"})

    assert errors[name] == [f"'nonsense' is not a valid choice; choose one of: {', '.join(c.value for c in choices)}."]


def test_a_long_value_is_cut_in_the_sentence(fleet, alice) -> None:
    message = refusal(alice, "jobs/", {"state": "x" * 500})["state"][0]

    assert message.startswith(f"'{'x' * 40}' is not a valid choice; choose one of: ")


def test_other_refusals_keep_their_words_and_good_values_still_filter(fleet, alice) -> None:
    assert refusal(alice, "jobs/", {"submitted_after": "yesterday"}) == {
        "submitted_after": ["'yesterday' is not a time: give an RFC 3339 instant with its time zone, "
                            "e.g. 2026-12-01T00:00:00Z or 2026-12-01T00:00:00-05:00"]}
    r = alice.get(f"{J}/jobs/", {"state": ["pending", "running"], "ordering": "-gpus,id"})
    assert r.status_code == 200, r.content


def test_an_unknown_waiting_reason_lists_the_codes(fleet, alice) -> None:
    """`?pending_code=QuotaExceded` (a typo) listed no job, as if none waited for quota: a
    Slurm user's `qm list --reason` could not tell a typo from an empty queue."""
    errors = refusal(alice, "jobs/", {"pending_code": "QuotaExceded"})

    assert list(errors) == ["pending_code"]
    assert errors["pending_code"] == [f"'QuotaExceded' is not a valid choice; choose one of: {', '.join(WAITING_CODES)}."]
    # The codes are PascalCase, as the jobs say them; another case is refused as `state` refuses `Running`.
    assert refusal(alice, "jobs/", {"pending_code": "quotaexceeded"})["pending_code"][0].startswith("'quotaexceeded'")


def test_every_reason_the_control_plane_writes_is_a_code_the_filter_takes(fleet, alice) -> None:
    """The codes a job gets from the control plane itself, before a cycle explains it, filter as
    the engine's do: submitted, submitted held, released from its hold, changed while it waits."""
    def submit(name: str, **extra: object) -> int:
        r = alice.post(f"{J}/jobs/", {"name": name, "gpus": 1, "command": "true", **extra}, format="json")
        assert r.status_code == 201, r.content
        return int(r.json()["id"])

    submitted, held, released, changed = submit("s"), submit("h", hold=True), submit("r", hold=True), submit("c")
    assert alice.post(f"{J}/jobs/{released}/release/").status_code == 200
    assert alice.patch(f"{J}/jobs/{changed}/", {"gpus": 2}, format="json").status_code == 200

    def listed(code: str) -> set[int]:
        r = alice.get(f"{J}/jobs/", {"pending_code": code})
        assert r.status_code == 200, r.content
        return {j["id"] for j in r.json()["results"]}

    assert (listed("Submitted"), listed("Held"), listed("Released"), listed("Changed")) == (
        {submitted}, {held}, {released}, {changed})


def test_the_history_csv_lists_the_ended_states_as_the_jobs_list_lists_its_states(fleet, alice) -> None:
    """`jobs/history.csv` built its 400 from the filterset's raw errors: `?state=running` said
    Django's "Select a valid choice. running is not one of the available choices." where the jobs
    list names the states it takes. One mechanism now (filtersets.refusals), for both."""
    from controlplane.services.job_history import ENDED_STATES

    r = alice.get(f"{J}/jobs/history.csv", {"state": "running"})
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {
        "state": [f"'running' is not a valid choice; choose one of: {', '.join(s.value for s in ENDED_STATES)}."]}
