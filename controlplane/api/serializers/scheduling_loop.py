"""The scheduling loop's state, as /healthz says it and the answers whose figures are the last
cycle's word carry it (metrics/queue/, jobs/, jobs/{id}/, jobs/{id}/explain/, jobs/priority/): a waiting
job's reason, place and ETA are as of the last cycle, so a stalled loop's are that old and no job
starts (qm says so: controlplane/cli/loop_state.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.services import fleet_figures


class LoopStateSerializer(serializers.Serializer):
    last_cycle_at = serializers.DateTimeField(allow_null=True, help_text="When the last scheduling cycle committed "
                                              "(null: none yet).")
    last_cycle_age_s = serializers.FloatField(allow_null=True, help_text="How long ago, seconds.")
    stalled = serializers.BooleanField(allow_null=True, help_text="No cycle committed for stalled_after_s: the "
                                       "waiting reasons are as of the last one, and no job starts (null: none yet).")
    stalled_after_s = serializers.FloatField(help_text="30 s, or five cycle intervals when those are longer.")


def loop_state() -> dict[str, Any]:
    """The loop's state as every answer carrying it says it, /healthz's `loop` (one query)."""
    return dict(LoopStateSerializer(fleet_figures.loop_figures()).data)
