"""Renaming a waiting job (PATCH jobs/{id}/ `name`) changes which singletons wait on it: the
singletons of its submitter and new name submitted after it wait on it from then on, and, a
singleton itself, it waits on the jobs of its new name ahead of it. A rename that would close
a cycle through such a wait is refused, 400 on `name` naming the cycle, and writes nothing; one
that closes none is accepted. Right after the rename, the reasons of the job and of the
singletons of its old and new name whose wait changed say what they wait for now."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, JobDependency, PendingPlace
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def submitted(client: Any, name: str, **body: Any) -> Job:
    r = client.post(JOBS, {"name": name, "gpus": 1, **body}, format="json")
    assert r.status_code == 201, r.json()
    return Job.objects.get(pk=r.json()["id"])


def patch(client: Any, job: Job, **body: Any) -> Any:
    return client.patch(f"{JOBS}{job.pk}/", body, format="json")


def refused_on_name(r: Any) -> str:
    assert r.status_code == 400, r.json()
    assert set(r.json()["errors"]) == {"name"}, r.json()
    return " ".join(r.json()["errors"]["name"])


def untouched(job: Job, name: str) -> None:
    """The refused rename wrote nothing: the name, the reason and no event."""
    fresh = Job.objects.get(pk=job.pk)
    assert fresh.name == name
    assert (fresh.pending_code, fresh.pending_words) == (job.pending_code, job.pending_words)
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED, reason="Changed",
                                    message__contains="name").exists()


# ---------------------------------------------------------------------------------- cycles


def test_renamed_into_a_later_singletons_name_while_waiting_on_it_is_a_cycle(fleet, alice) -> None:
    """X waits afterok on S, a singleton named “n” submitted after X. X renamed “n” would hold S
    up (it waits ahead of S), and S would never end: refused on `name`, the cycle named."""
    x = submitted(alice, "a")
    s = submitted(alice, "n", dependencies="singleton")
    assert patch(alice, x, dependencies=f"afterok:{s.pk}").status_code == 200
    x.refresh_from_db()
    s.refresh_from_db()

    message = refused_on_name(patch(alice, x, name="n"))

    assert message == (f"named “n”, job {x.pk} would wait on itself: job {x.pk} waits on job {s.pk} (afterok), "
                       f"which waits on job {x.pk} (singleton, same name “n”): a cycle, neither could ever start; "
                       "change its dependencies first, or keep its name")
    untouched(x, "a")
    assert Job.objects.get(pk=s.pk).pending_words == s.pending_words


def test_a_singleton_renamed_behind_an_earlier_job_of_that_name_waiting_on_it_is_a_cycle(fleet, alice) -> None:
    """B, named “n” and submitted first, waits afterok on X, a singleton named “a”. X renamed “n”
    would wait on B (ahead of it, same name), and B on X."""
    b = submitted(alice, "n")
    x = submitted(alice, "a", dependencies="singleton")
    assert patch(alice, b, dependencies=f"afterok:{x.pk}").status_code == 200
    x.refresh_from_db()

    message = refused_on_name(patch(alice, x, name="n"))

    assert message.startswith(f"named “n”, job {x.pk} would wait on itself: job {x.pk} waits on job {b.pk} "
                              f"(singleton, same name “n”), which waits on job {x.pk} (afterok): a cycle, neither")
    untouched(x, "a")


def test_a_rename_closing_a_longer_chain_names_every_link(fleet, alice) -> None:
    """X afterok C, C afterany S, S a later singleton named “n”: X renamed “n” closes X → C → S → X."""
    x = submitted(alice, "a")
    c = submitted(alice, "c")
    s = submitted(alice, "n", dependencies="singleton")
    assert patch(alice, c, dependencies=f"afterany:{s.pk}").status_code == 200
    assert patch(alice, x, dependencies=f"afterok:{c.pk}").status_code == 200
    x.refresh_from_db()

    message = refused_on_name(patch(alice, x, name="n"))

    assert (f"job {x.pk} waits on job {c.pk} (afterok), which waits on job {s.pk} (afterany), which waits on "
            f"job {x.pk} (singleton, same name “n”): a cycle, none of them could ever start") in message
    untouched(x, "a")


def test_a_rename_with_new_dependencies_is_judged_under_its_new_name(fleet, alice) -> None:
    """Name and dependencies changed at once: the new list is judged with the new name (S, a
    later singleton of it, waits on the renamed job), on the item that closes the cycle."""
    x = submitted(alice, "a")
    s = submitted(alice, "n", dependencies="singleton")

    r = patch(alice, x, name="n", dependencies=f"afterok:{s.pk}")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"dependencies.0.job": [
        f"job {s.pk} waits on this job (job {x.pk}): a cycle, neither could ever start"]}
    x.refresh_from_db()
    assert x.name == "a" and not JobDependency.objects.filter(job=x).exists()

    # ... and a singleton made so and renamed at once waits on the jobs of its new name
    running = f.make_job(fleet.ml, name="n2", state=JobState.RUNNING, submitter=fleet.users["owner"])
    r = patch(alice, x, name="n2", dependencies="singleton")
    assert r.status_code == 200, r.json()
    assert r.json()["job"]["pending_message"].startswith(
        f"Waits for job {running.pk} to end (now running; same name “n2”, singleton)")


def test_renames_that_close_no_cycle_pass(fleet, alice) -> None:
    # X waits on S, a singleton of the name submitted BEFORE X: S does not wait on X.
    s = submitted(alice, "n", dependencies="singleton")
    x = submitted(alice, "a")
    assert patch(alice, x, dependencies=f"afterok:{s.pk}").status_code == 200
    r = patch(alice, x, name="n")
    assert r.status_code == 200, r.json()
    assert r.json()["changes"] == {"name": ["a", "n"]}

    # A singleton renamed behind jobs of the name that wait on nothing of it: it waits, no cycle.
    y = submitted(alice, "b", dependencies="singleton")
    r = patch(alice, y, name="n")
    assert r.status_code == 200, r.json()
    assert Job.objects.get(pk=y.pk).name == "n"

    # A running job renamed into a name whose singleton it waited on before it ran: it waits on
    # nothing now, so it closes nothing.
    z = f.make_job(fleet.ml, name="z", state=JobState.RUNNING, submitter=fleet.users["owner"])
    assert patch(alice, z, name="n").status_code == 200

    # A job waiting on a singleton of the name whose dependency is met already closes nothing.
    done = f.make_job(fleet.ml, name="n", state=JobState.SUCCEEDED, submitter=fleet.users["owner"])
    w = submitted(alice, "w", dependencies=f"afterok:{done.pk}")
    assert patch(alice, w, name="n").status_code == 200


# --------------------------------------------------------------------- reasons right away


def test_a_singleton_freed_by_its_blockers_rename_says_so_at_once(fleet, alice) -> None:
    x = submitted(alice, "n")
    s = submitted(alice, "n", dependencies="singleton")
    assert s.pending_code == "WaitingForDependency"

    r = patch(alice, x, name="m")

    assert r.status_code == 200, r.json()
    s.refresh_from_db()
    assert s.pending_code == "DependencySatisfied"
    assert s.pending_message == (f"No other job named “n” of this submitter runs or waits ahead of it now (job {x.pk} "
                                 "was renamed “m”): back in the queue from the next scheduling cycle.")
    (event,) = Event.objects.filter(job=s, kind=EventKind.JOB_UPDATED, reason="DependencySatisfied")
    assert event.message == (f"Job {x.pk} was renamed “m” (was “n”): no other job named “n” of this submitter runs "
                             "or waits ahead of it now, so its singleton dependency is met; it waits on no other job now")
    assert alice.get(f"{JOBS}{s.pk}/").json()["pending_code"] == "DependencySatisfied"


def test_a_singleton_whose_nearest_blocker_leaves_names_the_next_one(fleet, alice) -> None:
    running = f.make_job(fleet.ml, name="n", state=JobState.RUNNING, submitter=fleet.users["owner"])
    x = submitted(alice, "n")
    s = submitted(alice, "n", dependencies="singleton")
    assert s.pending_message.startswith(f"Waits for job {x.pk} to end (now pending;")

    assert patch(alice, x, name="m").status_code == 200

    s.refresh_from_db()
    assert s.pending_code == "WaitingForDependency"
    assert s.pending_message == (f"Waits for job {running.pk} to end (now running; same name “n”, singleton): until "
                                 "then it is not in the queue and holds nothing.")
    assert s.pending_would_start_if == f"job {running.pk} ends"
    assert not Event.objects.filter(job=s, reason="DependencySatisfied").exists()  # still held up


def test_a_singleton_a_rename_now_holds_up_leaves_the_queue_at_once(fleet, alice) -> None:
    x = submitted(alice, "a")
    s = submitted(alice, "n", dependencies="singleton")
    assert s.pending_code == "Submitted"  # nothing of its name: in line from the next cycle
    PendingPlace.objects.create(job=s, queue_position=3)  # as a cycle ranked it

    assert patch(alice, x, name="n").status_code == 200

    s.refresh_from_db()
    assert s.pending_code == "WaitingForDependency"
    assert s.pending_message == (f"Waits for job {x.pk} to end (now pending; same name “n”, singleton): until then it "
                                 "is not in the queue and holds nothing.")
    assert not PendingPlace.objects.filter(job=s).exists()
    (event,) = Event.objects.filter(job=s, kind=EventKind.JOB_PENDING)
    assert event.reason == "WaitingForDependency" and event.data["renamed"] == x.pk
    # the renamed job itself waits on nothing: its reason stays as it was
    assert Job.objects.get(pk=x.pk).pending_code == "Submitted"


def test_a_running_job_renamed_into_a_name_holds_its_singletons_up_at_once(fleet, alice) -> None:
    z = f.make_job(fleet.ml, name="z", state=JobState.RUNNING, submitter=fleet.users["owner"])
    s = submitted(alice, "n", dependencies="singleton")

    assert patch(alice, z, name="n").status_code == 200

    s.refresh_from_db()
    assert s.pending_message.startswith(f"Waits for job {z.pk} to end (now running; same name “n”, singleton)")


def test_a_renamed_singleton_says_what_it_waits_for_under_its_new_name(fleet, alice) -> None:
    running = f.make_job(fleet.ml, name="n", state=JobState.RUNNING, submitter=fleet.users["owner"])
    x = submitted(alice, "a", dependencies="singleton")
    assert x.pending_code == "Submitted"

    r = patch(alice, x, name="n")

    assert r.status_code == 200, r.json()
    assert r.json()["job"]["pending_message"] == (
        f"Waits for job {running.pk} to end (now running; same name “n”, singleton): until then it is not in the "
        "queue and holds nothing.")

    # renamed away from it, it waits on nothing: "Changed" until the next cycle, as any change
    r = patch(alice, x, name="free")
    assert r.status_code == 200
    assert r.json()["job"]["pending_code"] == "Changed"
    assert r.json()["job"]["pending_message"] == ("Changed by alice; waiting for the next scheduling cycle to judge "
                                                  "it as it is now.")


def test_a_held_singleton_keeps_its_hold_and_says_what_else_it_waits_for(fleet, alice) -> None:
    running = f.make_job(fleet.ml, name="n", state=JobState.RUNNING, submitter=fleet.users["owner"])
    s = submitted(alice, "a", dependencies="singleton", hold=True)
    assert s.pending_code == "Held"

    assert patch(alice, s, name="n").status_code == 200

    s.refresh_from_db()
    assert s.pending_code == "Held"
    assert s.pending_message == ("Held by alice: until it is released it is not in the queue and holds nothing. It "
                                 f"also waits for job {running.pk} to end (now running; same name “n”, singleton).")
