"""A job's runs (one per allocation: services/job_runs.py), as `sacct --duplicates` lists a
requeued job's runs."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.api.serializers.fields import WholeNumberField
from controlplane.api.serializers.sentences import said
from controlplane.choices import AllocationState
from controlplane.services import job_runs


class RunGpusSerializer(serializers.Serializer):
    node = serializers.CharField()
    gpu_indices = serializers.ListField(child=WholeNumberField())
    role = serializers.CharField(help_text="The heterogeneous-gang role these GPUs served; empty for a plain gang.")


class RunAfterEndSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    by = serializers.CharField(help_text="Who put the ended job back in the queue.")
    reason = serializers.CharField(help_text="Why, in their words (may be empty).")
    held = serializers.BooleanField(help_text="It came back held (requeuehold).")


class JobRunSerializer(serializers.Serializer):
    """One run of a job (one allocation: services/job_runs.py), as `sacct --duplicates` lists a
    requeued job's runs."""

    run = WholeNumberField(help_text="1 for the job's first run, then in bind order.")
    generation = WholeNumberField(help_text="The run's generation, as its agents, events and output "
                                                    "(`logs/?generation=`) know it.")
    fenced_generation = WholeNumberField(allow_null=True, help_text="A fenced run's new generation "
                                                 "(past anything its old owner holds); null unless fenced.")
    epoch = WholeNumberField(source="allocation.epoch", help_text="The scheduler epoch that bound it.")
    state = serializers.ChoiceField(choices=AllocationState.choices, help_text="The allocation's state.")
    outcome = serializers.ChoiceField(
        choices=[(o, o) for o in job_runs.OUTCOMES],
        help_text="What became of the job when this run ended (requeued, succeeded, failed, cancelled, "
                  "timed_out), or where the run stands (starting, running, stopping).")
    reason = serializers.CharField(help_text="Why it ended, as a code: its release reason (Preempted, Resized, "
                                             "Requeued, Cancelled, RuntimeLimitExceeded, a fence's reason such "
                                             "as NodeLeaseExpired), Exited when its processes ended by "
                                             "themselves; empty while it runs.")
    ended_how = serializers.CharField(help_text="How it ended (or stands), in words.")
    exit_code = WholeNumberField(allow_null=True, help_text="The exit code its agents reported when it "
                                                                   "ended (143: stopped by SIGTERM); null if none.")
    notice = serializers.SerializerMethodField(help_text="The notice that stopped it (who preempted it and why, "
                                                         "a cancel, its runtime limit); empty when none did.")
    bound_at = serializers.DateTimeField(help_text="When the scheduler bound it to its GPUs.")
    started_at = serializers.DateTimeField(allow_null=True, help_text="When its agents reported it running.")
    ended_at = serializers.DateTimeField(allow_null=True, help_text="When its GPUs were released (or fenced).")
    stop_deadline = serializers.DateTimeField(allow_null=True,
                                              help_text="While being stopped: when its processes must be gone.")
    elapsed_s = WholeNumberField(
        allow_null=True, help_text="From its bind (its start, as the job's `started_at` and the history count it) to "
                                   "its end (or now): the time its GPUs were held.")
    gpus = WholeNumberField()
    nodes = serializers.ListField(child=serializers.CharField())
    roles = serializers.DictField(child=WholeNumberField(),
                                  help_text="GPUs per role, for a heterogeneous gang; empty otherwise.")
    placement = RunGpusSerializer(many=True)
    gpu_hours = serializers.FloatField(help_text="GPU-hours held, from its bind to its release (or now), as the "
                                                 "accounting counts allocated time.")
    cost_usd = serializers.FloatField(help_text="What it cost in US dollars, to the cent, as showback charges it: its "
                                                "GPU time from its bind to its release (or now), at the price of its "
                                                "nodes' GPU type and capacity tier in force at each instant. The "
                                                "job's runs add up to the list's total_cost_usd.")
    borrowed = serializers.BooleanField(help_text="It ran on borrowed capacity (above its team's nominal quota), as it stands now or stood at its release.")
    borrowed_from = serializers.DateTimeField(
        allow_null=True, help_text="Since when it counted as borrowed: its bind (`bound_at`) for a run bound so; for one "
                                   "bound within its team's quota that came to count as borrowed while it ran (the "
                                   "quota lowered, the team moved out of its cohort), the job.borrowing event's time; "
                                   "null while `borrowed` is false.")
    borrowed_because = serializers.CharField(help_text="Why a run bound within its team's quota came to count as "
                                                       "borrowed, in the job.borrowing event's words; empty otherwise.")
    lost_gpu_hours = serializers.FloatField(allow_null=True, help_text="The work its requeue threw away (GPUs × "
                                                                       "time since the last checkpoint); null "
                                                                       "when it did not end in a requeue.")
    requeued_after_end = RunAfterEndSerializer(allow_null=True, help_text="The job was put back in the queue "
                                                                          "after this run had ended; null if not.")

    def get_notice(self, run: job_runs.Run) -> str:
        return said(run.notice)
