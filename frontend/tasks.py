"""Periodic work that keeps the pages fast, on Celery beat's schedule (every half hour).

The teams page reads a finished UTC day's wait and slowdown bins from the shared store; a day
nobody has viewed since its bins expired is grouped in the database on the next view, which for
a month of a busy fleet is the slow path. Storing the longest window's days ahead of time keeps
every view on the fast path.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.utils import timezone

from controlplane.celery import app

from frontend import team_stats
from frontend.windows import WINDOWS


@shared_task(name="qm.frontend.keep_team_days", ignore_result=True)
def keep_team_days() -> None:
    """Group and store each whole day of the longest teams window that is not stored yet."""
    now = timezone.now()
    team_stats.waits_and_slowdowns(now - max(w.span for w in WINDOWS), now)


KEEP_EVERY_S = 1800.0


@app.on_after_finalize.connect
def _schedule(sender: Any, **kwargs: Any) -> None:
    # Well inside RECENT_DAY_TTL_S, so yesterday (kept an hour) never goes cold either.
    sender.add_periodic_task(KEEP_EVERY_S, keep_team_days.s(), name="keep-team-days", expires=KEEP_EVERY_S)
