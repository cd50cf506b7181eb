"""The pages' live endpoints (`/ui/*.json`) answer a job or node that is not there, or no longer
the reader's to see, in JSON with a `detail` naming it, as the API does: the page polling it says
those words and stops (qm.js). Until 7 Dec they answered the site's HTML "Not found" page, which
the page could only call "HTTP 404" and retry for ever."""

from __future__ import annotations

from controlplane.models import Membership, Node


def test_a_job_no_longer_visible_is_a_json_404_naming_it(client_for, submit_as):
    job = submit_as("alice", name="mine-then-not", hold=True)
    alice = client_for("alice")
    assert alice.get(f"/ui/jobs/{job.pk}.json").status_code == 200
    Membership.objects.filter(user__username="alice").delete()  # alice leaves every team

    answer = alice.get(f"/ui/jobs/{job.pk}.json")

    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": "No such job, or not yours to see."}


def test_a_deleted_node_is_a_json_404_naming_it(client_for):
    admin = client_for("admin")
    assert admin.get("/ui/nodes/a100-04.json").status_code == 200
    Node.objects.filter(name="a100-04").delete()

    answer = admin.get("/ui/nodes/a100-04.json")

    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": "No node is named 'a100-04'."}


def test_the_pages_themselves_still_answer_the_html_not_found_page(client_for):
    answer = client_for("admin").get("/nodes/no-such-node/")
    assert answer.status_code == 404
    assert answer["Content-Type"].startswith("text/html")
    assert b"Not found" in answer.content
