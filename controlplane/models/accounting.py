from __future__ import annotations

from django.db import models
from django.db.models import Q


class UsageSample(models.Model):
    """What one allocation did on one node over one sample interval, as its agent reported it.

    Allocated GPU-seconds = gpus × interval; active = allocated × gpu_activity; the steps and
    tokens deltas feed the productive tier. Rolled up by the accounting task; raw samples are
    dropped after the retention window only once their rollups exist.
    """

    allocation = models.ForeignKey("controlplane.Allocation", on_delete=models.CASCADE, related_name="usage_samples")
    job = models.ForeignKey("controlplane.Job", on_delete=models.CASCADE, related_name="usage_samples")
    # Indexed with ended_at below (one index, not two: samples are the busiest insert).
    node = models.ForeignKey("controlplane.Node", on_delete=models.CASCADE, related_name="usage_samples",
                             db_index=False)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(db_index=True)
    gpus = models.PositiveIntegerField()
    gpu_activity = models.FloatField(help_text="Mean device activity over the interval, 0..1.")
    steps = models.BigIntegerField(default=0)
    useful_tokens = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-ended_at"]
        indexes = [
            # A node's samples over a window (the node page's tiers): before, a 6-hour window read
            # the node's whole week through the node_id index and discarded 96 % of it.
            models.Index(fields=["node", "ended_at"], name="usage_sample_node_ended"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(gpu_activity__gte=0) & Q(gpu_activity__lte=1), name="usage_activity_0_1"),
            models.CheckConstraint(condition=Q(ended_at__gt=models.F("started_at")), name="usage_interval_positive"),
        ]
