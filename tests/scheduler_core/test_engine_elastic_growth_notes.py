"""Rule 8's other half, said: a running elastic job below its maximum that does not grow gets a
GrowthNote naming what held it back (growth off, the queue first, not worth its resize, its
team's quota, the head's reservation, no room, a maintenance window). A job that grew has a
Resize instead; one at its maximum, or stopping, has neither."""

from __future__ import annotations

from engine_builders import bound, make_cluster, make_job, make_running

from scheduler_core import GrowthCode, GrowthNote, SchedulerConfig

NOW = 10_000.0


def _elastic(max_gpus: int = 16, *, limit: float = 86400, resize_cost: float = 0.0):
    return (make_running(make_job("e").gpus(8).per_node(8).elastic(8, max_gpus)
                         .resize_cost(resize_cost).limit(limit))
            .whole("n0").started(NOW - 60))


def _note(plan) -> GrowthNote:
    [note] = plan.growth_notes
    assert note.job_id == "e"
    return note


def test_elastic_growth_note_none_when_it_grew_or_is_at_its_maximum():
    grew = make_cluster().nodes(2).at(NOW).running(_elastic()).plan()
    assert [r.job_id for r in grew.resizes] == ["e"]
    assert grew.growth_notes == ()
    at_max = make_cluster().nodes(2).at(NOW).running(_elastic(max_gpus=8)).plan()
    assert at_max.resizes == () and at_max.growth_notes == ()


def test_elastic_growth_note_growth_off():
    plan = make_cluster().nodes(2).at(NOW).running(_elastic()).plan(
        SchedulerConfig(elastic_growth=False))
    note = _note(plan)
    assert note.code is GrowthCode.GROWTH_OFF
    assert note.message == ("Holds 8 of at most 16 GPUs: elastic growth is off in the "
                            "scheduler's policy.")


def test_elastic_growth_note_not_worth_its_resize_cost():
    # 1 h left on 8 GPUs: 8 more finish it 1800 s sooner, not more than a 7200 s resize
    running = (make_running(make_job("e").gpus(8).per_node(8).elastic(8, 16)
                            .resize_cost(7200).limit(7200)).whole("n0").started(NOW - 3600))
    note = _note(make_cluster().nodes(2).at(NOW).running(running).plan())
    assert note.code is GrowthCode.NOT_WORTH_IT
    assert note.message == ("Holds 8 of at most 16 GPUs: 8 more GPUs would finish it only about "
                            "30 min sooner, not more than its 2.0 h resize cost.")


def test_elastic_growth_note_team_quota():
    plan = (make_cluster().nodes(2).at(NOW).quota("ml", "a100", 8)
            .running(_elastic()).plan())
    assert plan.resizes == ()
    note = _note(plan)
    assert note.code is GrowthCode.QUOTA
    assert note.message == "Holds 8 of at most 16 GPUs: team ml's quota has no room for 8 more a100 GPUs."


def test_elastic_growth_note_no_room_once_the_queue_took_the_free_gpus():
    plan = (make_cluster().nodes(2).at(NOW).running(_elastic())
            .pending(make_job("waiting").gpus(8)).plan())
    assert "waiting" in bound(plan)
    note = _note(plan)
    assert note.code is GrowthCode.NO_ROOM
    assert "no capable nodes have room for 8 more GPUs in its shape now" in note.message


def test_elastic_growth_note_the_queue_first_when_jobs_were_left_untried():
    # a placement budget of one attempt: "a" takes n1, "b" is not tried; nothing grows into
    # n2 or n3 though "b" would have fitted there
    plan = (make_cluster().nodes(4).at(NOW).running(_elastic())
            .pending(make_job("a").gpus(8).submitted(0), make_job("b").gpus(8).submitted(1))
            .plan(SchedulerConfig(max_placement_attempts=1)))
    assert "a" in bound(plan) and "b" not in bound(plan)
    note = _note(plan)
    assert note.code is GrowthCode.QUEUE_FIRST
    assert "it grows only in a cycle that tried every waiting job first" in note.message


def test_elastic_growth_note_a_maintenance_window_on_its_nodes():
    plan = (make_cluster().nodes(2).at(NOW).running(_elastic())
            .maintenance("fw", "n0", start=NOW + 3600, end=NOW + 7200).plan())
    assert plan.resizes == ()
    note = _note(plan)
    assert note.code is GrowthCode.MAINTENANCE_WINDOW
    assert "its run reaches into a maintenance window on its nodes" in note.message


def test_elastic_growth_note_none_for_a_job_being_stopped():
    running = _elastic().terminating()
    plan = make_cluster().nodes(2).at(NOW).running(running).plan(SchedulerConfig(elastic_growth=False))
    assert plan.growth_notes == ()


def test_elastic_growth_note_behind_the_head_reservation_on_its_teams_quota():
    # team ml may hold 24 and holds 16 (e, and m until t+1 h); its head job h needs 16, so it
    # waits for m's GPUs of quota. 8 more for e fit the quota now but would leave h short then
    plan = (make_cluster().nodes(4).at(NOW).quota("ml", "a100", 24)
            .running(_elastic(),
                     make_running(make_job("m").gpus(8).limit(3600)).whole("n1").started(NOW))
            .pending(make_job("h").gpus(16).per_node(8).limit(3600))
            .plan())
    assert [r.job_id for r in plan.reservations] == ["h"]
    assert plan.resizes == ()
    note = _note(plan)
    assert note.code is GrowthCode.BEHIND_RESERVATION
    assert note.message == ("Holds 8 of at most 16 GPUs: 8 more a100 GPUs would take quota that "
                            "the job holding the reservation needs when it starts.")
