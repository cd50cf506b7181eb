"""The fleet's figures and the scheduler's view of it: queue depth, the jobs in line and their
priority (sprio), fair share (sshare), the scheduling policy, how far the ETAs held,
fragmentation."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.pagination import Pagination
from controlplane.api.serializers.metrics import (
    EtaRecordQuerySerializer,
    EtaRecordSerializer,
    FairShareSerializer,
    FragmentationMetricsSerializer,
    JobPriorityQuerySerializer,
    JobPrioritySerializer,
    QueueMetricsSerializer,
    SchedulerPolicySerializer,
)
from controlplane.api.views.api_mixin import ApiMixin
from controlplane.services import eta_record, fair_share, fleet_figures, job_priority, scheduler_policy


class QueueMetricsView(ApiMixin, APIView):
    """Queue depth: pending jobs and GPUs by reason, priority class and team (counts only)."""

    @extend_schema(responses={200: QueueMetricsSerializer})
    def get(self, request: Request) -> Response:
        figures = fleet_figures.queue_figures()
        # Why jobs wait is the last cycle's word: say how old it is, as /healthz does.
        return Response(QueueMetricsSerializer({**vars(figures), "loop": fleet_figures.loop_figures()}).data)


class JobPriorityView(ApiMixin, APIView):
    """Slurm's sprio: the waiting jobs you may see in queue order, each with what places it
    there (its class's value, the points waiting added, its team's dominant share, its runtime
    limit), as the next cycle orders them (services/job_priority.py; the engine's
    queue_factors): a page of them (`limit`, `offset`, as every list's), with their `count`,
    under `?job=` and `?team=`."""

    query_parameters = frozenset({"format", "job", "team", "limit", "offset"})

    @extend_schema(parameters=[JobPriorityQuerySerializer], responses={200: JobPrioritySerializer})
    def get(self, request: Request) -> Response:
        query = JobPriorityQuerySerializer(data=request.query_params, context={"user": request.user})
        query.is_valid(raise_exception=True)
        pages = Pagination()
        limit, offset = pages.get_limit(request), pages.get_offset(request)
        found = job_priority.priorities(request.user, query.validated_data.get("job") or (),
                                        team=query.validated_data.get("team"), offset=offset, limit=limit)
        # The page's links as every list's (api/pagination.py), from the count the service gave.
        pages.request, pages.count, pages.limit, pages.offset = request, found.count, limit, offset
        return Response(JobPrioritySerializer({**vars(found), "next": pages.get_next_link(),
                                               "previous": pages.get_previous_link(),
                                               "loop": fleet_figures.loop_figures()}).data)


class FairShareView(ApiMixin, APIView):
    """Slurm's sshare: every team's dominant share and its parts (held now, decayed past usage,
    each resource's share), lowest first, as the next cycle orders the queue by them
    (services/fair_share.py; the engine's fairshare)."""

    @extend_schema(responses={200: FairShareSerializer})
    def get(self, request: Request) -> Response:
        return Response(FairShareSerializer(fair_share.fair_shares()).data)


class SchedulerPolicyView(ApiMixin, APIView):
    """The scheduling policy in force (`scontrol show config`): the engine's settings as the
    loop runs them, the loop's timings, and the leader now (services/scheduler_policy.py)."""

    @extend_schema(responses={200: SchedulerPolicySerializer})
    def get(self, request: Request) -> Response:
        return Response(SchedulerPolicySerializer(scheduler_policy.policy()).data)


class EtaMetricsView(ApiMixin, APIView):
    """How far the ETAs told to waiting jobs held: of the jobs that started in the last `days`
    (default 7) after waiting with an ETA, the share that started by the first one told, and by
    how much sooner or later; the same per size class (services/eta_record.py)."""

    query_parameters = frozenset({"format", "days"})

    @extend_schema(parameters=[EtaRecordQuerySerializer], responses={200: EtaRecordSerializer})
    def get(self, request: Request) -> Response:
        query = EtaRecordQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(EtaRecordSerializer(eta_record.track_record(days=query.validated_data["days"])).data)


class FragmentationMetricsView(ApiMixin, APIView):
    """Free GPUs per pool, the largest free block, and GPUs stranded by fragmentation."""

    @extend_schema(responses={200: FragmentationMetricsSerializer})
    def get(self, request: Request) -> Response:
        return Response(FragmentationMetricsSerializer(fleet_figures.fragmentation_figures()).data)
