"""Periodic work that keeps the pages fast (beat's schedule: settings.CELERY_BEAT_SCHEDULE).

The teams page reads a finished UTC day's wait and slowdown bins from the shared store; a day
nobody has viewed since its bins expired is grouped in the database on the next view, which for
a month of a busy fleet is the slow path. Storing the longest window's days ahead of time keeps
every view on the fast path.
"""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from frontend import team_stats
from frontend.windows import WINDOWS


@shared_task(name="qm.frontend.keep_team_days", ignore_result=True)
def keep_team_days() -> None:
    """Group and store each whole day of the longest teams window that is not stored yet."""
    now = timezone.now()
    team_stats.waits_and_slowdowns(now - max(w.span for w in WINDOWS), now)

