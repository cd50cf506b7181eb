"""A planned agent shutdown logs no warning once the control plane has taken its goodbye.

Found on the SRE drill: SIGTERM to `qm-agent` (the runbook's way to take a node out) stopped the
jobs, said goodbye and exited as documented, but its log ended with one WARNING per node,
"control plane says this node must register again; stopping everything" (`state=down`): the
reply that confirms the goodbye read like a node thrown out, and a log alert on warnings fired
on every planned restart. The goodbye's confirmation is now logged at info ("goodbye taken");
a `reregister` that is not the answer to a goodbye still warns.
"""

from __future__ import annotations

from structlog.testing import capture_logs

from tests.controlplane.agent.test_node_agent import (
    FakeClock,
    ScriptedControlPlane,
    allocation,
    make_agent,
    run_for,
)

REREGISTER_WARNING = "control plane says this node must register again; stopping everything"


def test_sre_a_planned_shutdown_ends_without_a_warning() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0])]
    with capture_logs() as logs:
        agent = make_agent(plane, clock)
        run_for(agent, clock, 1.0)
        agent.shutdown(grace_s=2.0)
        run_for(agent, clock, 4.0)

    assert agent.done
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == []
    assert any(e["event"].startswith("goodbye taken") for e in logs)


def test_sre_a_reregister_outside_a_shutdown_still_warns() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0])]
    with capture_logs() as logs:
        agent = make_agent(plane, clock)
        run_for(agent, clock, 1.0)
        plane.reregister = True
        run_for(agent, clock, 3.0)

    assert REREGISTER_WARNING in [e["event"] for e in logs if e["log_level"] == "warning"]
