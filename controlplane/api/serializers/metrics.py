"""The fleet's figures and the scheduler's view of it: queue depth, the jobs in line and their
priority (sprio), fair share (sshare), the scheduling policy and its leader, how far the ETAs
held, fragmentation."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.api.serializers.fields import WholeNumberField, no_record_named
from controlplane.api.serializers.scheduling_loop import LoopStateSerializer
from controlplane.api.serializers.sentences import SaidField
from controlplane.filtersets import JOBS_SCOPE
from controlplane.services import access, eta_record
from controlplane.services.whole_numbers import is_whole_number, whole_number


class QueueMetricsSerializer(serializers.Serializer):
    pending_jobs = WholeNumberField()
    pending_gpus = WholeNumberField()
    running_jobs = WholeNumberField()
    running_gpus = WholeNumberField()
    oldest_pending_s = serializers.FloatField(allow_null=True, help_text="Wait of the longest-waiting job, seconds.")
    pending_by_reason = serializers.DictField(child=WholeNumberField())
    pending_by_priority_class = serializers.DictField(child=WholeNumberField())
    pending_by_team = serializers.DictField(child=WholeNumberField())
    unschedulable_jobs = WholeNumberField()
    loop = LoopStateSerializer(help_text="The scheduling loop, as /healthz says it: the reasons jobs wait for are "
                               "as of its last cycle.")


class JobPriorityQuerySerializer(serializers.Serializer):
    """`?job=` and `?team=` (its `limit` and `offset` are the API's pages', api/pagination.py).
    The request's user is the context's `user`: a team is one whose jobs they may read."""

    job = serializers.CharField(
        required=False, help_text="Only these jobs: ids separated by commas (`?job=12,13`), as `sprio -j`.")
    team = serializers.CharField(
        required=False, max_length=64,
        help_text="Only this team's jobs (`?team=ml`, as `sprio -A`): one whose jobs you may read, else a 400.")

    def validate_team(self, value: str) -> str:
        teams = access.member_teams(self.context["user"])
        if "\x00" in value or not teams.filter(name=value).exists():
            raise serializers.ValidationError(no_record_named(teams, value.replace("\x00", ""), scope=JOBS_SCOPE))
        return value

    def validate_job(self, value: str) -> list[int]:
        ids = []
        for part in value.split(","):
            part = part.strip()
            # isdigit() then int(): '²' passed the one and broke the other (a 500)
            if not is_whole_number(part) or not 1 <= whole_number(part) <= 2**63 - 1:
                raise serializers.ValidationError(
                    f"{part[:40]!r} is not a job id: give whole numbers from 1, separated by commas (job=12,13)")
            ids.append(whole_number(part))
        return ids


class JobPriorityRowSerializer(serializers.Serializer):
    job = WholeNumberField()
    name = serializers.CharField()
    array_id = serializers.UUIDField(allow_null=True, help_text="The job array it is a task of; null for a job alone.")
    array_index = WholeNumberField(allow_null=True, help_text="Its index in that array (`sweep [3]`).")
    order = WholeNumberField(help_text="1-based place among every job in line now (the next cycle's order).")
    team = serializers.CharField()
    priority_class = serializers.CharField()
    class_value = WholeNumberField(help_text="The priority class's value.")
    aging_points = serializers.FloatField(help_text="What waiting added (aging_per_hour per whole hour waited).")
    effective_priority = serializers.FloatField(help_text="class_value + aging_points: higher goes first.")
    team_share = serializers.FloatField(
        help_text="The team's dominant share (DRF over GPUs, CPUs, memory, with decayed past usage): among "
                  "equal priorities the lower goes first.")
    runtime_limit_s = serializers.FloatField(allow_null=True, help_text="Among equals, the shorter goes first.")
    can_run = serializers.BooleanField(
        help_text="False for a job that can never run as asked (CanNeverRun): its `order` is by priority alone, and "
                  "the cycle places it after every job that can start (its queue_position).")
    never_ahead = WholeNumberField(
        help_text="Of a job that can run, how many of the jobs ahead of it in `order` can never run as asked "
                  "(other teams' too): the cycle places them after it, so its place among the jobs that can start "
                  "(its queue_position) is `order` less these; 0 for a job that can never run.")
    reason_code = serializers.CharField(
        allow_null=True,
        help_text="Of a job that can never run as asked, the engine's reason as the last cycle stored it (its "
                  "PascalCase code: CanNeverRun, InvalidRequest, UnknownPriorityClass), as `jobs/{id}/explain/`'s "
                  "`reason_code`; null for a job that can run (why it waits moves each cycle: see its explain).")
    reason = SaidField(
        allow_null=True,
        help_text="Of a job that can never run as asked, the engine's sentence saying why, with its numbers, as "
                  "`jobs/{id}/explain/`'s `reason` (\"Can never run on this fleet: it needs 16 GPUs on one node; the "
                  "largest capable node has 8.\"); null for a job that can run.")


class JobPrioritySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    queue_order = serializers.CharField(help_text="The queue-order plugin the scheduler runs.")
    in_line = WholeNumberField(help_text="Jobs in line in all, the ones you may not see included.")
    count = WholeNumberField(
        help_text="The jobs in line you may see (under `job` and `team` when given): `jobs` is a page of them.")
    next = serializers.CharField(allow_null=True, help_text="The next page's URL (`limit` and `offset`); null at the end.")
    previous = serializers.CharField(allow_null=True, help_text="The previous page's URL; null on the first.")
    jobs = JobPriorityRowSerializer(
        many=True, help_text="A page of the jobs in line you may see, in queue order: `limit` of them (50 unless "
                             "given, at most 1,000) from `offset`.")
    team_shares = serializers.DictField(child=serializers.FloatField(),
                                        help_text="Each team with a job in line: its dominant share.")
    loop = LoopStateSerializer(help_text="The scheduling loop, as /healthz says it: the order is the next cycle's, "
                               "and no job starts until one runs.")


class SchedulerLeaderSerializer(serializers.Serializer):
    holder = serializers.CharField(help_text="The process leading the scheduling loop (empty: none yet).")
    epoch = WholeNumberField(help_text="Its epoch: the fencing token every allocation carries.")
    expires_at = serializers.DateTimeField(allow_null=True)
    last_cycle_at = serializers.DateTimeField(allow_null=True)
    last_cycle_ms = serializers.FloatField(allow_null=True)
    cycles = WholeNumberField()


class SchedulerPolicySerializer(serializers.Serializer):
    engine = serializers.DictField(
        help_text="Every setting of the engine's SchedulerConfig as the loop builds it each cycle: queue_order, "
                  "filters, placement_by_workload, victim_chooser, locality_weights, fair_share_half_life_s, "
                  "aging_per_hour, backfill, preemption, elastic_growth, the per-cycle caps, ... "
                  "(docs/engine.md).")
    loop = serializers.DictField(help_text="The loop's timings (settings.QM, environment QM_<NAME>).")
    leader = SchedulerLeaderSerializer(allow_null=True, help_text="The scheduler lease; null before the first cycle.")


class FairShareRowSerializer(serializers.Serializer):
    team = serializers.CharField()
    dominant_share = serializers.FloatField(
        help_text="The largest of its shares, each held now + past usage decayed, over the fleet's capacity (`qm "
                  "sshare`'s SHARE): among jobs of equal priority, the team with the lower one goes first.")
    dominant_resource = serializers.CharField(
        help_text="gpus, cpus or memory: the resource whose share is the dominant one; empty for a team that holds "
                  "and used nothing.")
    shares = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Per resource (gpus, cpus, memory): (held now + past usage decayed, as an average holding) ÷ the "
                  "fleet's capacity.")
    held_now = serializers.DictField(child=WholeNumberField(), help_text="gpus, cpus, memory_gb held now.")
    decayed_usage = serializers.DictField(
        child=serializers.FloatField(),
        help_text="gpu_hours, cpu_hours, memory_gb_hours used in the past, decayed to now by the half-life.")


class FairShareSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the fleet was read.")
    half_life_s = serializers.FloatField(help_text="How fast past usage fades (SchedulerConfig.fair_share_half_life_s).")
    teams = FairShareRowSerializer(many=True, help_text="Lowest dominant share first: the order the queue favours.")


class EtaRecordQuerySerializer(serializers.Serializer):
    days = WholeNumberField(min_value=1, max_value=eta_record.MAX_DAYS, default=eta_record.DEFAULT_DAYS,
                                    help_text="The jobs that started in the last this many days.")


class EtaSizeClassSerializer(serializers.Serializer):
    size_class = serializers.ChoiceField(choices=list(eta_record.SIZE_CLASSES))
    node_gpus = WholeNumberField(
        help_text="The GPUs of the fleet's largest node: small jobs ask fewer, large ones at least that many.")
    judged = WholeNumberField()
    on_time = serializers.FloatField(allow_null=True)
    median_share_of_wait = serializers.FloatField(allow_null=True)
    median_early_s = serializers.FloatField(allow_null=True)
    late_p95_s = serializers.FloatField(allow_null=True)
    late_max_s = serializers.FloatField(allow_null=True)


class EtaRecordSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    judged = WholeNumberField(help_text="Jobs that started in the window after waiting with an ETA.")
    on_time = serializers.FloatField(
        allow_null=True, help_text="Share of them that started no later than the first ETA they were told.")
    median_share_of_wait = serializers.FloatField(
        allow_null=True, help_text="Median of the wait they had ÷ the wait they were told, both from when the ETA "
                                   "was first told: 0.4 = the median job started after 40 % of it.")
    median_early_s = serializers.FloatField(
        allow_null=True, help_text="How many seconds before its ETA the median on-time job started.")
    late_p95_s = serializers.FloatField(
        allow_null=True, help_text="Lateness past the ETA told, 95th percentile over all of them (0 when on time).")
    late_max_s = serializers.FloatField(allow_null=True, help_text="The latest start past the ETA told, seconds.")
    size_classes = EtaSizeClassSerializer(
        many=True, help_text="The same per size class, small then large; empty when no job is judged or the fleet "
                             "has no node.")


class PoolFragmentationSerializer(serializers.Serializer):
    pool = serializers.CharField()
    gpu_type = serializers.CharField()
    nodes = WholeNumberField()
    total_gpus = WholeNumberField()
    allocated_gpus = WholeNumberField()
    free_gpus = WholeNumberField(help_text="Free GPUs on ready nodes outside any maintenance window now.")
    unavailable_gpus = WholeNumberField(help_text="Free GPUs on nodes that are not ready, or that are "
                                                          "inside a maintenance window now (they take no work).")
    largest_free_block = WholeNumberField(
        help_text="Most idle GPUs on one ready node; GPUs held idle for a waiting job's reservation included.")
    whole_free_nodes = WholeNumberField()
    partially_used_nodes = WholeNumberField()
    stranded_gpus = WholeNumberField(
        help_text="Idle GPUs on partly used ready nodes while a job needing whole nodes of this pool waits; "
                  "GPUs held idle for a waiting job's reservation included."
    )
    waiting_whole_node_jobs = WholeNumberField(
        help_text="Jobs in line (not held, no dependency still to meet, not found never to run) that need whole "
                  "nodes of this pool and could use them."
    )


class FragmentationMetricsSerializer(serializers.Serializer):
    total_gpus = WholeNumberField()
    allocated_gpus = WholeNumberField()
    free_gpus = WholeNumberField()
    stranded_gpus = WholeNumberField(
        help_text="Idle GPUs on partly used ready nodes while a job that needs a whole node waits; "
                  "GPUs held idle for a waiting job's reservation included (the cycle's figure in /metrics)."
    )
    pending_for_contiguous_gpus = WholeNumberField(
        help_text="Jobs waiting as InsufficientContiguousGpus: enough GPUs free, not in one piece."
    )
    reserved_gpus = WholeNumberField(
        allow_null=True,
        help_text="Idle GPUs held for a waiting job's reservation or nomination (nodes draining for a gang), "
                  "as the last scheduling cycle counted them (quartermaster_reserved_gpus in /metrics); "
                  "null before the first cycle."
    )
    pools = PoolFragmentationSerializer(many=True)
