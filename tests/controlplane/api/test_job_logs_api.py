"""A job's output through the control plane: agents ship it with their contacts, users read it
at GET /api/v1/jobs/{id}/logs/ (services/job_logs.py, api/job_logs.py).

The agents' side is played over HTTP with each node's real token, as qm-agent sends it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job, JobLogChunk, Team
from controlplane.services import job_logs, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    agent_client,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture(autouse=True)
def _fast_hashing_and_bootstrap(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


def user_client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(user)}")
    return client


@pytest.fixture
def alice(fleet: LoopFleet) -> APIClient:
    return user_client(f.make_user("alice", team=fleet.team))


def chunk(generation: int, offset: int, text: str, rank: int = 0) -> dict[str, Any]:
    return {"generation": generation, "rank": rank, "offset": offset, "bytes": len(text.encode()), "text": text}


def ship(token: str, node: str, *chunks: dict[str, Any], endpoint: str = "heartbeat") -> dict[str, Any]:
    r = agent_client(token).post(f"{J}/agent/nodes/{node}/{endpoint}", {"logs": list(chunks)}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def logs(client: APIClient, job: Job, **params: Any) -> dict[str, Any]:
    r = client.get(f"{J}/jobs/{job.pk}/logs/", params)
    assert r.status_code == 200, r.content
    return r.json()


def running_job(fleet: LoopFleet, node: Any, gpus: list[int] | None = None) -> tuple[Job, int]:
    job = make_job(fleet, gpus=len(gpus or [0]))
    return job, bind(job, {node: gpus or [0]}).generation


def test_a_retried_report_does_not_duplicate_lines(fleet: LoopFleet, alice: APIClient) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    first = chunk(g, 0, "epoch 1\n")
    ship(token, "gpu-01", first)
    ship(token, "gpu-01", first)  # the reply was lost: the agent sends the same chunk again
    ship(token, "gpu-01", chunk(g, 8, "epoch 2\n"), endpoint="report")
    ship(token, "gpu-01", chunk(g, 8, "epoch 2\n"))

    body = logs(alice, job)

    assert body["text"] == "epoch 1\nepoch 2\n"
    assert body["generation"] == g and body["rank"] == 0 and body["node"] == "gpu-01"
    assert body["offset"] == 0 and body["next_offset"] == 16 and body["pruned_bytes"] == 0


def test_small_chunks_that_follow_on_share_a_row(fleet: LoopFleet, alice: APIClient) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    offset = 0
    for i in range(50):
        line = f"step {i}\n"
        ship(token, "gpu-01", chunk(g, offset, line))
        offset += len(line)

    assert JobLogChunk.objects.filter(job=job).count() == 1
    assert logs(alice, job)["text"] == "".join(f"step {i}\n" for i in range(50))


def test_two_ranks_are_kept_apart(fleet: LoopFleet, alice: APIClient) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node, [0, 1])
    ship(token, "gpu-01", chunk(g, 0, "rank zero says hi\n", rank=0), chunk(g, 0, "rank one here\n", rank=1))

    zero, one = logs(alice, job), logs(alice, job, rank=1)

    assert zero["text"] == "rank zero says hi\n" and one["text"] == "rank one here\n"
    assert zero["ranks"] == one["ranks"] == [0, 1]
    # a rank the run never had (2 GPUs: ranks 0 and 1) is a 400 (test_job_logs_no_such_rank.py)
    nothing = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 5})
    assert nothing.status_code == 400 and "there is no rank 5" in nothing.json()["errors"]["rank"][0]


def test_a_requeued_jobs_two_runs_are_kept_apart_and_a_fenced_runs_late_lines_join_its_own(
    fleet: LoopFleet, alice: APIClient
) -> None:
    node, token = register_node("gpu-01")
    job, first = running_job(fleet, node)
    ship(token, "gpu-01", chunk(first, 0, "first run: step 1\n"))
    allocation = Allocation.objects.get(job=job)
    with transaction.atomic():
        assert transitions.fence_allocation(allocation.pk, lease=reconcile.lock_scheduler_lease(),
                                            at=timezone.now(), actor="test", reason="test")
    job.refresh_from_db()
    second = bind(job, {node: [1]}).generation
    # The old run's agent had not been told yet: its last line arrives after the new run began.
    ship(token, "gpu-01", chunk(second, 0, "second run: step 1\n"), chunk(first, 18, "first run: step 2\n"))

    latest = logs(alice, job)
    old = logs(alice, job, generation=first)

    assert latest["generation"] == second and latest["text"] == "second run: step 1\n"
    assert old["text"] == "first run: step 1\nfirst run: step 2\n"
    assert latest["generations"] == [first, second]
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED


def test_a_chunk_naming_a_run_never_on_that_node_is_dropped(fleet: LoopFleet, alice: APIClient) -> None:
    node, _ = register_node("gpu-01")
    register_node("gpu-02")
    _, intruder = register_node("gpu-03")
    job, g = running_job(fleet, node)

    ship(intruder, "gpu-03", chunk(g, 0, "not my job\n"))

    assert not JobLogChunk.objects.exists()
    assert logs(alice, job)["text"] == ""


def test_another_teams_member_gets_the_same_404_as_for_the_job(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    ship(token, "gpu-01", chunk(g, 0, "secret weights path\n"))
    bob = user_client(f.make_user("bob", team=Team.objects.create(name="vision")))

    for path in (f"{J}/jobs/{job.pk}/", f"{J}/jobs/{job.pk}/logs/", f"{J}/jobs/{job.pk}/logs/?format=txt"):
        r = bob.get(path)
        assert r.status_code == 404, path
        assert "secret" not in r.content.decode()
    assert f"No job {job.pk}" in bob.get(f"{J}/jobs/{job.pk}/logs/").json()["detail"]
    admin = user_client(f.make_user("root", superuser=True))
    assert logs(admin, job)["text"] == "secret weights path\n"


def test_following_returns_only_what_came_after_the_offset(fleet: LoopFleet, alice: APIClient) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    ship(token, "gpu-01", chunk(g, 0, "loading data\n"))
    seen = logs(alice, job)
    idle = logs(alice, job, offset=seen["next_offset"])
    ship(token, "gpu-01", chunk(g, 13, "step 100 loss 2.1\n"))

    new = logs(alice, job, offset=idle["next_offset"])

    assert idle["text"] == "" and idle["next_offset"] == 13
    assert new["text"] == "step 100 loss 2.1\n" and new["offset"] == 13 and new["next_offset"] == 31


def test_tails_cut_to_whole_lines(fleet: LoopFleet, alice: APIClient) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    text = "".join(f"line {i:03d}\n" for i in range(100))  # 9 bytes a line
    ship(token, "gpu-01", chunk(g, 0, text))

    assert logs(alice, job, tail_lines=3)["text"] == "line 097\nline 098\nline 099\n"
    assert logs(alice, job, tail_bytes=20)["text"] == "line 098\nline 099\n"
    assert logs(alice, job, tail_lines=500)["text"] == text


def test_pruning_keeps_each_ranks_last_bytes_and_the_reader_says_what_went(
    fleet: LoopFleet, alice: APIClient, settings: Any
) -> None:
    settings.QM = {**settings.QM, "JOB_LOG_KEEP_BYTES_PER_RANK": 40_000}
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    offset = 0
    for i in range(10):  # ten chunks of 10,000 bytes
        text = f"{i}" * 9_999 + "\n"
        ship(token, "gpu-01", chunk(g, offset, text))
        offset += 10_000

    rows = list(JobLogChunk.objects.filter(job=job).order_by("offset").values_list("offset", "nbytes"))
    body = logs(alice, job)
    raw = alice.get(f"{J}/jobs/{job.pk}/logs/", {"format": "txt"})

    kept = sum(n for _, n in rows)
    assert 40_000 <= kept <= 50_000 and rows[-1] == (90_000, 10_000)
    assert body["pruned_bytes"] == rows[0][0] > 0 and body["offset"] == rows[0][0]
    assert body["notice"] == f"… {rows[0][0]} bytes earlier were pruned (the last 40000 bytes of each rank's output are kept)."
    assert body["text"].endswith("9" * 9_999 + "\n") and len(body["text"]) == kept
    assert raw["Content-Type"].startswith("text/plain")
    assert raw.content.decode().startswith(f"… {rows[0][0]} bytes earlier were pruned")
    # A follower already past the pruned part is not told again.
    assert logs(alice, job, offset=90_000)["notice"] == ""


def test_output_goes_with_its_job(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    ship(token, "gpu-01", chunk(g, 0, "hello\n"))
    assert JobLogChunk.objects.filter(job=job).exists()

    Job.objects.filter(pk=job.pk).delete()

    assert not JobLogChunk.objects.exists()


@pytest.mark.parametrize(("params", "field"), [
    ({"rank": "-1"}, "rank"),
    ({"rank": "zero"}, "rank"),
    ({"generation": "999999"}, "generation"),
    ({"offset": "abc"}, "offset"),
    ({"tail_bytes": "0"}, "tail_bytes"),
    ({"tail_bytes": str(9 * 1024 * 1024)}, "tail_bytes"),
    ({"tail_lines": "10001"}, "tail_lines"),
    ({"offset": "0", "tail_lines": "5"}, "tail_lines"),
    ({"lines": "5"}, "lines"),
    # Python's int() read these (h58, 5 Dec): a number is written in digits, as every other whole-number parameter
    ({"offset": "1_000"}, "offset"),
    ({"tail_bytes": "+5"}, "tail_bytes"),
    ({"rank": " 0"}, "rank"),
], ids=["negative-rank", "word-rank", "other-generation", "word-offset", "zero-tail", "tail-past-kept",
        "too-many-lines", "offset-and-tail", "unknown", "underscored-offset", "signed-tail", "spaced-rank"])
def test_a_bad_parameter_is_a_400_naming_it(fleet: LoopFleet, alice: APIClient, params: dict[str, str],
                                            field: str) -> None:
    node, _ = register_node("gpu-01")
    job, _ = running_job(fleet, node)

    r = alice.get(f"{J}/jobs/{job.pk}/logs/", params)

    assert r.status_code == 400, r.content
    assert field in r.json()["errors"], r.json()
    assert field in r.json()["detail"]


def test_a_job_that_never_ran_has_no_output_in_words(fleet: LoopFleet, alice: APIClient) -> None:
    job = make_job(fleet)

    body = logs(alice, job)

    assert body["generation"] is None and body["generations"] == [] and body["text"] == ""
    assert body["notice"] == f"Job {job.pk} has not run yet: no output."


def test_no_output_as_text_is_an_empty_text_plain_body(fleet: LoopFleet, alice: APIClient) -> None:
    """Nothing to say (a job that never ran; a follow with nothing new) is still text/plain, as
    the schema says: DRF dropped the Content-Type of an empty body (found by schemathesis)."""
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    ship(token, "gpu-01", chunk(g, 0, "loading data\n"))
    never_ran = make_job(fleet)

    for path in (f"{J}/jobs/{never_ran.pk}/logs/?format=txt", f"{J}/jobs/{job.pk}/logs/?format=txt&offset=13"):
        r = alice.get(path)

        assert r.status_code == 200 and r.content == b"", path
        assert r.get("Content-Type") == "text/plain; charset=utf-8", path


@pytest.mark.parametrize(("bad", "field"), [
    ({"bytes": 64 * 1024 + 1}, "bytes"),
    ({"offset": -1}, "offset"),
    ({"text": ""}, "text"),
], ids=["chunk-over-64KiB", "negative-offset", "empty-text"])
def test_the_agent_endpoint_refuses_a_bad_chunk_naming_the_field(fleet: LoopFleet, bad: dict[str, Any],
                                                                 field: str) -> None:
    node, token = register_node("gpu-01")
    _, g = running_job(fleet, node)

    r = agent_client(token).post(f"{J}/agent/nodes/gpu-01/heartbeat", {"logs": [{**chunk(g, 0, "x\n"), **bad}]},
                                 format="json")

    assert r.status_code == 400
    assert f"logs.0.{field}" in r.json()["errors"], r.json()
    assert not JobLogChunk.objects.exists()


def test_the_agent_endpoint_refuses_more_than_a_mebibyte_in_one_contact(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    _, g = running_job(fleet, node, [0])
    big = "y" * job_logs.CHUNK_BYTES
    chunks = [chunk(g, 0, big, rank=r) for r in range(17)]  # 17 x 64 KiB

    r = agent_client(token).post(f"{J}/agent/nodes/gpu-01/heartbeat", {"logs": chunks}, format="json")

    assert r.status_code == 400 and "logs" in r.json()["errors"], r.json()


def test_a_bad_parameter_in_plain_text_is_said_in_words(fleet: LoopFleet, alice: APIClient) -> None:
    node, _ = register_node("gpu-01")
    job, _ = running_job(fleet, node)

    r = alice.get(f"{J}/jobs/{job.pk}/logs/", {"format": "txt", "rank": "x"})

    assert r.status_code == 400 and r["Content-Type"].startswith("text/plain")
    assert r.content.decode() == "rank: 'x' is not a whole number: give 0 or more.\n"


def _queries(run: Any) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        run()
    return len(captured.captured_queries)


def test_output_that_follows_on_costs_a_heartbeat_one_query(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    _, g = running_job(fleet, node)
    client = agent_client(token)
    url = f"{J}/agent/nodes/gpu-01/heartbeat"
    client.post(url, {"running": [g], "logs": [chunk(g, 0, "starting\n")]}, format="json")

    idle = _queries(lambda: client.post(url, {"running": [g]}, format="json"))
    printing = _queries(lambda: client.post(url, {"running": [g], "logs": [chunk(g, 9, "step 1\n")]}, format="json"))

    assert printing == idle + 1


def test_a_batch_of_nodes_output_is_stored_in_a_constant_number_of_queries(fleet: LoopFleet) -> None:
    nodes = {}
    for i in range(20):
        node, token = register_node(f"n{i}")
        nodes[f"n{i}"] = (token, running_job(fleet, node)[1])
    client = agent_client("unused")
    url = f"{J}/agent/nodes/heartbeats"

    def batch(offset: int, text: str, logs: bool = True) -> None:
        r = client.post(url, {"nodes": [
            {"name": name, "token": token, "running": [g], **({"logs": [chunk(g, offset, text)]} if logs else {})}
            for name, (token, g) in nodes.items()
        ]}, format="json")
        assert r.status_code == 200 and all(x["status"] == 200 for x in r.json()["results"])

    idle = _queries(lambda: batch(0, "", logs=False))
    first = _queries(lambda: batch(0, "started\n"))  # every run's first lines: one lookup, one INSERT
    following = _queries(lambda: batch(8, "step 1\n"))  # one UPDATE for all twenty

    assert first == idle + 2 and following == idle + 1
    assert all(logs(user_client(f.make_user(f"u{g}", superuser=True)), Job.objects.get(allocations__generation=g))[
        "text"] == "started\nstep 1\n" for _, g in list(nodes.values())[:3])


# --- a rank the run never had
# A run is named by its number in the job and its lease generation: "generation 49" alone read as
# the job's 49th run (the generation is a fleet-wide lease counter); the job page says "run 1 ·
# lease generation 49".
# A rank a run never had is a 400 naming `rank`: `qm logs 1 --rank 5` of a 1-GPU job said
# "Rank 5 of generation 49 has written nothing yet; ranks with output: 0." and exited 0, as if it
# might still write (and `qm logs -f --rank 5` waited for ever). A rank the run has that has not
# written yet keeps its notice. Ranks are the run's GPUs, or its nodes with QM_LAUNCH=per_node.


def test_a_rank_beyond_the_runs_gpus_is_a_400_naming_rank(fleet: LoopFleet, alice: APIClient) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet, gpus=2)
    g = bind(job, {node: [0, 1]}).generation

    beyond = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 5})
    quiet = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1})

    assert beyond.status_code == 400, beyond.content
    assert beyond.json()["errors"] == {"rank": [f"Run 1 of job {job.pk} (lease generation {g}) has 2 ranks (0–1): there is no rank 5."]}
    assert quiet.status_code == 200 and quiet.json()["notice"] == f"Run 1 of job {job.pk} (lease generation {g}) has written nothing yet."


def test_a_rank_that_wrote_nothing_in_a_job_that_ended_is_not_told_yet(fleet: LoopFleet, alice: APIClient) -> None:
    """`qm logs 57 --rank 9` of a 32-GPU gang that had ended said "Rank 9 of generation 219 has
    written nothing yet" (demo walk, 5 Dec): nothing more will come once the job has ended."""
    node, _ = register_node("gpu-01")
    job = make_job(fleet, gpus=2)
    g = bind(job, {node: [0, 1]}).generation
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, exit_code=0)

    quiet = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1})

    assert quiet.status_code == 200 and quiet.json()["notice"] == f"Run 1 of job {job.pk} (lease generation {g}) wrote nothing.", (
        quiet.json())


def test_a_rank_that_wrote_nothing_in_a_run_that_is_over_is_not_told_yet(fleet: LoopFleet, alice: APIClient) -> None:
    """`qm logs 12 --rank 31 --generation 12` of a gang requeued (waiting again, its run over)
    said "has written nothing yet": a run that ended writes no more, whatever the job does now.
    The run it runs now still may."""
    node, _ = register_node("gpu-01")
    job = make_job(fleet, gpus=2)
    first = bind(job, {node: [0, 1]}).generation
    Allocation.objects.filter(generation=first).update(state=AllocationState.RELEASED, released_at=timezone.now())
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING)  # requeued: waiting again

    waiting = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1, "generation": first})

    assert waiting.status_code == 200 and waiting.json()["notice"] == (
        f"Run 1 of job {job.pk} (lease generation {first}) wrote nothing."), waiting.json()
    other, _ = register_node("gpu-02")
    second = bind(job, {other: [0, 1]}).generation
    earlier = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1, "generation": first})
    now = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1, "generation": second})
    assert earlier.json()["notice"] == f"Run 1 of job {job.pk} (lease generation {first}) wrote nothing."
    assert now.json()["notice"] == f"Run 2 of job {job.pk} (lease generation {second}) has written nothing yet."


def test_per_node_launch_has_a_rank_a_node(fleet: LoopFleet, alice: APIClient) -> None:
    one, _ = register_node("gpu-01")
    two, _ = register_node("gpu-02")
    job = make_job(fleet, gpus=4, env={"QM_LAUNCH": "per_node"})
    g = bind(job, {one: [0, 1], two: [0, 1]}).generation

    assert alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1}).status_code == 200
    beyond = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 2})
    assert beyond.status_code == 400
    assert beyond.json()["errors"]["rank"] == [f"Run 1 of job {job.pk} (lease generation {g}) has 2 ranks (0–1): there is no rank 2."]


def test_the_job_page_says_it_on_its_output_panel(fleet: LoopFleet, alice: APIClient, client) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet, gpus=1)
    bind(job, {node: [0]})
    client.force_login(f.make_user("carol", team=fleet.team))

    page = client.get(f"/jobs/{job.pk}/", {"rank": 3}).content.decode()

    assert "there is no rank 3." in page


@pytest.mark.parametrize("offset", [str(2**63), "99999999999999999999", "9" * 5000])
def test_an_offset_beyond_what_the_storage_holds_is_a_400_naming_it(fleet: LoopFleet, alice: APIClient,
                                                                   offset: str) -> None:
    """A log offset is a bigint (JobLogChunk.offset; the agent's chunks end at 2⁶³−1 at most):
    until 5 Dec `?offset=99999999999999999999` answered 200, echoing it as `offset` and
    `next_offset` (a position no output can ever reach), and 5,000 digits said "not a whole
    number"."""
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    ship(token, "gpu-01", chunk(g, 0, "loading data\n"))

    r = alice.get(f"{J}/jobs/{job.pk}/logs/", {"offset": offset})

    assert r.status_code == 400, r.content[:300]
    shown = offset if len(offset) <= 40 else f"{offset[:40]}…"
    assert r.json()["errors"] == {"offset": [f"{shown} is out of range: give from 0 to {2**63 - 1}."]}


def test_an_offset_past_what_is_stored_waits_there_as_a_follow_does(fleet: LoopFleet, alice: APIClient) -> None:
    """Up to 2⁶³−1, an offset past the end is read as a follow with nothing new yet (as
    docs/api.md says): empty text, next_offset where it was asked, end_offset what is stored."""
    node, token = register_node("gpu-01")
    job, g = running_job(fleet, node)
    ship(token, "gpu-01", chunk(g, 0, "loading data\n"))

    body = logs(alice, job, offset=2**63 - 1)

    assert (body["text"], body["offset"], body["next_offset"], body["end_offset"]) == ("", 2**63 - 1, 2**63 - 1, 13)
    assert body["more"] is False


def test_the_schema_says_the_bounds_of_each_parameter(fleet: LoopFleet, alice: APIClient) -> None:
    """The generated OpenAPI schema says what docs/api.md says and the endpoint enforces: until
    6 Dec its `offset` read "Read from this byte on (at most 1 MiB)", no word of its bound
    (0 to 2⁶³−1), nor of rank's (0 to 1,000,000) or generation's (1 or more)."""
    schema = alice.get("/api/schema/", {"format": "json"}).json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/jobs/{id}/logs/"]["get"]["parameters"]}
    bounds = {name: (parameters[name]["schema"].get("minimum"), parameters[name]["schema"].get("maximum"))
              for name in ("offset", "rank", "generation")}

    assert bounds == {"offset": (0, 2**63 - 1), "rank": (0, 1_000_000), "generation": (1, None)}
    assert "0 to 9223372036854775807 (2⁶³−1)" in parameters["offset"]["description"]
    assert "0 to 1,000,000" in parameters["rank"]["description"]
    assert "1 or more" in parameters["generation"]["description"]
