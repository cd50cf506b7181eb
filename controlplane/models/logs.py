from __future__ import annotations

from django.db import models
from django.db.models import Q


class JobLogChunk(models.Model):
    """A piece of one rank's output (stdout and stderr, as the job wrote them) of one run.

    A run is an allocation generation: a requeued job's second run has its own generation, so
    its output is never mixed with the first's. `offset` and `nbytes` count the bytes the agent
    read from the rank's log file on its node; `text` is those bytes decoded as UTF-8 (invalid
    bytes and NULs become U+FFFD), so `offset + nbytes` is the next chunk's `offset`. The agent
    ships at most 64 KiB per rank per report; small chunks that follow on are appended to the
    rank's last row up to 4 KiB (services/job_logs.py), so a chatty job costs rows by the
    4 KiB, not by the heartbeat. Only the last bytes of each rank are kept (QM
    JOB_LOG_KEEP_BYTES_PER_RANK, 8 MiB by default); older chunks are pruned.
    """

    job = models.ForeignKey("controlplane.Job", on_delete=models.CASCADE, related_name="log_chunks",
                            db_index=False)  # led by the (job, generation) index below
    generation = models.BigIntegerField(help_text="The allocation generation (one run of the job).")
    # The node's name, not a key: the output outlives a node taken out of the fleet.
    node_name = models.CharField(max_length=128)
    rank = models.PositiveIntegerField(help_text="The process's RANK (NODE_RANK for a per-node launch).")
    offset = models.BigIntegerField(help_text="Byte offset of this chunk in the rank's output.")
    nbytes = models.PositiveIntegerField(help_text="Bytes of output this chunk covers (before decoding).")
    text = models.TextField()
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["generation", "rank", "offset"]
        indexes = [models.Index(fields=["job", "generation"], name="job_log_job_generation")]
        constraints = [
            # Idempotent by offset: a resent chunk lands on this and is dropped.
            models.UniqueConstraint(fields=["generation", "rank", "offset"], name="job_log_chunk_once"),
            models.CheckConstraint(condition=Q(offset__gte=0) & Q(nbytes__gt=0), name="job_log_chunk_bytes"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} g{self.generation} rank {self.rank} @{self.offset}+{self.nbytes}"

    @property
    def end(self) -> int:
        return self.offset + self.nbytes
