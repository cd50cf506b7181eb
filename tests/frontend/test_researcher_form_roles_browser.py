"""In Chromium: the jobs page's submit form takes a heterogeneous gang. A researcher adds role
rows (name, members, GPUs per member, GPU types, memory, CPUs), removes one, sees GPUs become the
roles' sum, and submits; the job stored has exactly those roles. A bad role's error shows next to
that role's field, in the API's words."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def fill_role(page: Any, index: int, *, name: str, count: str, gpus_per_member: str,
              gpu_types: list[str] | None = None, min_gpu_memory_gb: str = "") -> None:
    row = page.locator("[data-role-row]").nth(index)
    row.get_by_label("Role name").fill(name)
    row.get_by_label("Members").fill(count)
    row.get_by_label("GPUs per member").fill(gpus_per_member)
    if gpu_types:
        row.get_by_label("GPU types").select_option(gpu_types)
    if min_gpu_memory_gb:
        row.get_by_label("Min GPU memory (GB)").fill(min_gpu_memory_gb)


def test_researcher_submits_a_gang_of_two_roles_through_the_form(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    gpus = page.locator("[data-field=gpus]")
    page.fill("[data-field=name]", "rlhf-form")
    gpus.fill("3")

    # Three rows, the middle one removed: the rows left are numbered again, and sent as two.
    for _ in range(3):
        page.click("[data-add-role]")
    expect(page.locator("[data-role-row]")).to_have_count(3)
    # Adding a role puts the cursor in its name; GPUs is now the roles' (read-only).
    expect(page.locator("[data-role-row]").nth(2).get_by_label("Role name")).to_be_focused()
    expect(gpus).to_have_attribute("readonly", "")
    fill_role(page, 0, name="learner", count="1", gpus_per_member="8", gpu_types=["H100-80GB"])
    fill_role(page, 1, name="spare", count="2", gpus_per_member="2")
    fill_role(page, 2, name="rollout", count="4", gpus_per_member="1", gpu_types=["A100-40GB"], min_gpu_memory_gb="40")
    expect(gpus).to_have_value("16")
    page.get_by_role("button", name="Remove role 2").click()
    expect(page.locator("[data-role-row]")).to_have_count(2)
    expect(page.locator("[data-role-legend]")).to_have_text(["Role 1", "Role 2"])
    expect(page.get_by_role("button", name="Remove role 3")).to_have_count(0)
    expect(gpus).to_have_value("12")

    expect(page.locator("[data-verdict]")).to_contain_text(
        "This fleet can run 12 GPUs as roles learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB)",
        timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("[data-error-for]:visible")).to_have_count(0)
    alice.screenshot("submit-form-roles")
    page.click("#submit-job button[type=submit]")
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    page.wait_for_selector("body[data-charts-ready=true]")

    job = Job.objects.get(name="rlhf-form")
    assert job.gpus == 12 and job.gpus_per_node is None and job.submitter.username == "alice"
    assert job.roles == [
        {"name": "learner", "count": 1, "gpus_per_member": 8, "gpu_types": ["H100-80GB"],
         "min_gpu_memory_gb": 0, "cpus_per_gpu": 0, "memory_gb_per_gpu": 0},
        {"name": "rollout", "count": 4, "gpus_per_member": 1, "gpu_types": ["A100-40GB"],
         "min_gpu_memory_gb": 40, "cpus_per_gpu": 0, "memory_gb_per_gpu": 0},
    ]
    expect(page.locator("dt:text-is('Roles') + dd")).to_have_text(
        "learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB)")


def test_removing_every_role_gives_gpus_back_as_typed(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    gpus = page.locator("[data-field=gpus]")
    page.fill("[data-field=name]", "plain")
    gpus.fill("2")
    page.click("[data-add-role]")
    expect(gpus).to_have_value("")
    expect(page.locator("[data-gpus-from-roles]")).to_be_visible()
    page.get_by_role("button", name="Remove role 1").click()
    expect(page.locator("[data-role-row]")).to_have_count(0)
    expect(gpus).to_have_value("2")
    expect(gpus).not_to_have_attribute("readonly", "")
    expect(page.locator("[data-gpus-from-roles]")).to_be_hidden()
    expect(page.get_by_role("button", name="Add a role")).to_be_focused()
    expect(page.locator("[data-verdict]")).to_contain_text("This fleet can run 2 GPUs", timeout=ANSWER_TIMEOUT_MS)


def test_a_bad_role_is_named_next_to_its_field_in_the_apis_words(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "bad-gang")
    page.click("[data-add-role]")
    page.click("[data-add-role]")
    fill_role(page, 0, name="learner", count="1", gpus_per_member="8")
    fill_role(page, 1, name="rollout", count="0", gpus_per_member="1")

    second = page.locator("[data-role-row]").nth(1)
    members = second.get_by_label("Members")
    error = second.locator('[data-error-for="roles.1.count"]')
    expect(error).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    expect(members).to_have_attribute("aria-invalid", "true")
    # Only that field: the first role and the second role's other fields carry no error.
    expect(page.locator("[data-error-for]:visible")).to_have_count(1)
    expect(page.locator("[data-verdict]")).to_contain_text("Role 2, Members: ")  # its label, not "roles.1.count"
    # The API, asked the same, names the same field with the same words.
    body = {"name": "bad-gang", "gpus": 8, "roles": [{"name": "learner", "count": 1, "gpus_per_member": 8},
                                                      {"name": "rollout", "count": 0, "gpus_per_member": 1}]}
    answer = page.evaluate("body => QM.api('POST', '/api/v1/jobs/', body)", body)
    assert answer["status"] == 400
    assert error.inner_text() == " ".join(answer["data"]["errors"]["roles.1.count"])
    assert "a role has at least 1 member" in error.inner_text()
    alice.screenshot("submit-form-bad-role")

    # Submitted anyway, the API's refusal lands on the same field; nothing is stored.
    page.click("#submit-job button[type=submit]")
    expect(page.locator("[data-verdict]")).to_contain_text("Role 2, Members: ", timeout=ANSWER_TIMEOUT_MS)
    expect(error).to_have_text(" ".join(answer["data"]["errors"]["roles.1.count"]))
    assert not Job.objects.filter(name="bad-gang").exists()

    # Fixed, the error goes away.
    members.fill("4")
    expect(error).to_be_hidden(timeout=ANSWER_TIMEOUT_MS)
    expect(members).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("[data-verdict]")).to_contain_text("This fleet can run 12 GPUs", timeout=ANSWER_TIMEOUT_MS)
    alice.expect_refusal("/api/v1/jobs/", 400)  # the two 400s the test provoked


def test_role_rows_fit_a_phone(session: Any) -> None:  # noqa: F811
    """On a 390 px screen two role rows and the roles' error fit: the page does not scroll sideways."""
    alice = session("alice")
    alice.page.set_viewport_size({"width": 390, "height": 900})
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "phone-gang")
    page.click("[data-add-role]")
    page.click("[data-add-role]")
    fill_role(page, 0, name="learner", count="1", gpus_per_member="8", gpu_types=["H100-80GB"])
    fill_role(page, 1, name="rollout", count="4", gpus_per_member="16")
    # A member no node can hold is said on its own role's field, naming the role.
    expect(page.locator('[data-error-for="roles.1.gpus_per_member"]')).to_contain_text(
        "role rollout asks 16 GPUs on one node; the largest node has 8", timeout=ANSWER_TIMEOUT_MS)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the jobs page with two roles is {width} px wide on a 390 px screen"
    for i in range(2):
        right = page.evaluate(f"document.querySelectorAll('[data-role-row]')[{i}].getBoundingClientRect().right")
        assert right <= 390, f"role {i + 1} ends at {right} px on a 390 px screen"
    alice.screenshot("submit-form-roles-390px")
