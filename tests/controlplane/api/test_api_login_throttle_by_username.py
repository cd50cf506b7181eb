"""Password guessing against one account from many addresses is throttled per username too.
Until 6 Dec sign-ins were counted per client address only (`login`), so a guesser spreading
over many addresses met no limit on the account they aimed at. Now a username's failed
sign-ins in the last period (`login_user`, QM_SIGN_IN_FAILURES_PER_USERNAME, default 20/hour)
are counted from any address, by the API's token request and both sign-in forms alike; beyond
them each answers 429 with Retry-After and words. A sliding window, not a lockout: a refused
attempt is not counted, and each failure lets one attempt through again once it is a period old."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from controlplane.api.throttling import sign_in_failed, username_refused
from tests.controlplane.sign_in_addresses import fresh_address, sign_in_rates

pytestmark = pytest.mark.django_db
TOKEN = "/api/v1/auth/token/"


@pytest.fixture
def three_failures_a_minute(settings: Any) -> None:
    sign_in_rates(settings, login="10000/minute", login_user="3/minute")


@pytest.fixture
def target(db: Any) -> str:
    """An account no other test guessed against (the counters live in Redis for the period)."""
    name = f"target-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_user(name, password="right-horse-battery", is_staff=True, is_superuser=True)
    return name


def _api(username: str, password: str) -> Any:
    return APIClient().post(TOKEN, {"username": username, "password": password}, format="json",
                            REMOTE_ADDR=fresh_address())


def test_guesses_from_many_addresses_are_refused_for_the_username(three_failures_a_minute, target) -> None:
    assert [_api(target, f"guess-{i}").status_code for i in range(3)] == [400, 400, 400]

    refused = _api(target, "right-horse-battery")  # the right password too, from a new address

    assert refused.status_code == 429, refused.content
    assert 0 < int(refused["Retry-After"]) <= 60
    body = refused.json()
    assert body["code"] == "throttled" and "Too many failed sign-ins for this username" in body["detail"]
    assert body["retry_after"] == int(refused["Retry-After"])
    for form in ("/accounts/login/", "/admin/login/"):  # one counter for the API and both forms
        page = Client().post(form, {"username": target, "password": "right-horse-battery"}, REMOTE_ADDR=fresh_address())
        assert page.status_code == 429 and 0 < int(page["Retry-After"]) <= 60
        assert "Too many failed sign-ins for this username" in page.content.decode()
    other = f"other-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_user(other, password="another-good-one")
    assert _api(other, "another-good-one").status_code == 200  # another account is not touched


@pytest.mark.parametrize("form", ["/accounts/login/", "/admin/login/"])
def test_the_forms_failures_count_too(three_failures_a_minute, target, form) -> None:
    codes = [Client().post(form, {"username": target, "password": f"guess-{i}"}, REMOTE_ADDR=fresh_address()).status_code
             for i in range(3)]

    assert codes == [200, 200, 200]  # the form again, saying the password is wrong
    assert _api(target, "right-horse-battery").status_code == 429
    assert username_refused(target.upper()) is not None  # one counter however the name is cased


def test_the_window_slides_and_refusals_do_not_extend_it(three_failures_a_minute, target) -> None:
    now = time.time()
    for age in (58.0, 57.5, 57.0):  # three failures that leave the minute in 2 to 3 s
        sign_in_failed(target, now=now - age)
    refused = _api(target, "right-horse-battery")
    assert refused.status_code == 429 and int(refused["Retry-After"]) <= 3, refused.content
    assert [_api(target, "guess").status_code for _ in range(3)] == [429] * 3  # not counted

    time.sleep(max(0.0, now + 3.2 - time.time()))

    signed_in = _api(target, "right-horse-battery")
    assert signed_in.status_code == 200, signed_in.content


def test_each_failure_that_ages_out_lets_one_attempt_through(three_failures_a_minute, target) -> None:
    now = time.time()
    for age in (50.0, 40.0, 10.0):
        sign_in_failed(target, now=now - age)

    assert username_refused(target, now=now) == pytest.approx(10.0)
    assert username_refused(target, now=now + 10.5) is None  # the oldest left the window
    sign_in_failed(target, now=now + 11)
    assert username_refused(target, now=now + 11) == pytest.approx(9.0)  # the next oldest (40 s before) leaves at +20
