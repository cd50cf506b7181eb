"""The engine says a runtime limit as qm, the job page and the events do (`sentences.span_words`):
exactly, as it is typed, `1 h 30 min`, `2 h`. Until 7 Dec its own sentences said it otherwise: a
kill "reached its runtime limit of 90 min (started 91 min ago)", a job behind the head "its
runtime limit of 5400 s ends after that", a job kept off a node in maintenance "its runtime limit
of 90 min would end it" (and "2.0 h", "2.5 h" for 2 h 29 min), beside a job page and a
`qm status` saying `1 h 30 min`."""

from __future__ import annotations

from scheduler_core.sentences import span_words
from scheduler_core.types import ReasonCode, SchedulerConfig
from tests.scheduler_core.engine_builders import make_cluster, make_job, make_running, why

HOUR_AND_A_HALF = 5400


def test_a_kill_at_the_runtime_limit_says_the_limit_as_it_was_typed() -> None:
    plan = (
        make_cluster().nodes(1).at(HOUR_AND_A_HALF + 75)
        .running(make_running(make_job("j").gpus(8).limit(HOUR_AND_A_HALF)).whole("n0").started(0))
        .plan()
    )
    [kill] = plan.kills
    assert kill.message == ("Job j reached its runtime limit of 1 h 30 min (started 1 h 31 min 15 s ago) "
                            "and is stopped.")


def test_a_job_behind_the_head_says_its_runtime_limit_as_it_was_typed() -> None:
    plan = (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r0").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("r1").gpus(8).limit(3600)).whole("n1"))
        .pending(make_job("head").gpus(16).limit(3600).submitted(0),
                 make_job("long").gpus(4).limit(HOUR_AND_A_HALF).submitted(1))
        .plan()
    )
    long = why(plan, "long")
    assert long.code is ReasonCode.BEHIND_HIGHER_PRIORITY
    assert long.message.startswith("It fits only on GPUs reserved for job head, which starts at t=3600; its "
                                   "runtime limit of 1 h 30 min ends after that, so starting now would delay it.")


def test_a_job_kept_off_a_node_in_maintenance_says_its_runtime_limit_as_it_was_typed() -> None:
    plan = (
        make_cluster().nodes(1).at(0)
        .maintenance("7", "n0", start=3600, end=7200, reason="firmware upgrade")
        .pending(make_job("j").gpus(8).limit(HOUR_AND_A_HALF))
        .plan(SchedulerConfig())
    )
    w = why(plan, "j")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert "and its runtime limit of 1 h 30 min would end it at t=5400." in w.message, w.message


def test_the_control_planes_spelling_of_a_span_is_the_engines() -> None:
    # One definition: qm and the pages import it from span_text, which has no words of its own.
    from controlplane.services import span_text

    assert span_text.span_words is span_words
