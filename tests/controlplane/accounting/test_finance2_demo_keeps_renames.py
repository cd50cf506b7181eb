"""Finance QA, round 2 (30 Nov): after renaming team `language` to `lang-ai` and restarting the
demo, the demo's seed created a second team `language` (with its quotas and projects) and made bob
a member of both; a renamed user or GPU type came back the same way. The seed now fills a fresh
database only: a database it has seeded (or that holds a fleet already) keeps what people did to it.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Event, GpuType, Membership, Quota, Team

pytestmark = pytest.mark.django_db


def bobs_teams() -> set[str]:
    return set(Membership.objects.filter(user__username="bob").values_list("team__name", flat=True))


@pytest.mark.parametrize("seeded_before_the_marker", [False, True])
def test_a_renamed_team_user_and_gpu_type_stay_renamed_after_a_restart(seeded_before_the_marker: bool) -> None:
    seed_demo_fleet()
    if seeded_before_the_marker:      # a demo database seeded by an earlier version: no record of the seed
        Event.objects.filter(reason="DemoSeeded").delete()
    Team.objects.filter(name="language").update(name="lang-ai")
    get_user_model().objects.filter(username="finn").update(username="fiona")
    GpuType.objects.filter(name="A100-40GB").update(name="A100-40GB-SXM")
    quotas = Quota.objects.count()

    seed_demo_fleet()                 # `make demo` again

    assert not Team.objects.filter(name="language").exists()
    assert bobs_teams() == {"lang-ai"}
    assert not get_user_model().objects.filter(username="finn").exists()
    assert not GpuType.objects.filter(name="A100-40GB").exists()
    assert Quota.objects.count() == quotas


def test_a_fresh_database_is_seeded_once_and_says_so() -> None:
    seed_demo_fleet()
    seed_demo_fleet()
    assert Team.objects.count() == 3 and bobs_teams() == {"language"}
    assert Event.objects.filter(reason="DemoSeeded").count() == 1
