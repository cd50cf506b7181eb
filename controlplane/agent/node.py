"""One node's agent: lease, generations, and the desired-versus-actual loop.

`NodeAgent.step()` is one small round; the caller runs it again after the delay it returns.
A round:
  1. reap: members whose processes are gone become `exited` (or `lost`) reports;
  2. enforce: a member past its stop deadline is SIGKILLed; a member still running
     `limit_grace_s` past its runtime limit without having been told to stop (the control
     plane is unreachable or its loop is down) is stopped here: SIGTERM, SIGKILL after the
     same grace;
  3. self-fence: if the lease could not be renewed for `lease_s - margin`, measured on this
     machine's monotonic clock from the moment the last successful heartbeat was *sent*, every
     member is SIGKILLed. The control plane counts the same lease from when it *received* that
     heartbeat, so the processes are gone before it may fence the allocations and reuse the
     GPUs. The agent then registers again, clean;
  4. talk: register if needed, else heartbeat with the reports (every contact renews the lease;
     an exit goes at once, or within 50 ms when the rest of a burst of short jobs is ending);
     a contact refused (400) for some of its elements goes again at once without them, and
     those are kept in the state directory's REFUSED_FILE, never sent again (`_refused`); a 429,
     or a 502/503/504 with Retry-After, is waited out (`AskAgain`), but never past the lease
     (`LEASE_KEEPING_FLOOR_S`);
  5. apply the desired allocations:
       - a generation lower than one already seen on any of its GPUs is refused (stale or out
         of order) and reported;
       - a new active allocation is launched once no older member holds its GPUs (an older one
         still there is stale and is killed first);
       - a releasing allocation gets SIGTERM, and SIGKILL when its grace period runs out;
       - anything running that the control plane no longer lists is stale: SIGKILL.
  6. sample: every `sample_interval_s`, progress and device activity per member.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from controlplane.agent.client import (
    AgentClient,
    ProtocolError,
    Refused,
    Retired,
    Throttled,
    Unauthorized,
    Unreachable,
)
from controlplane.agent.launch_journal import LaunchJournal
from controlplane.agent.logs import BACKLOG_DELAY_S, Chunk, LogShipper, Unshipped, open_regular
from controlplane.agent.members import Assignment, Launcher, Member, describe

log = structlog.get_logger("qm.agent")

MAX_OUTBOX = 5000
#: The most reports one contact carries: the control plane refuses more (controlplane/api/agent.py,
#: MAX_REPORTS, a 400 naming `reports` as a whole). A fuller queue (a long partition) goes in
#: several contacts, BACKLOG_DELAY_S apart.
MAX_CONTACT_REPORTS = 2000
# The control plane stops a job at its runtime limit; should it not have done so this long
# after (it cannot be reached, its loop is down), the agent does: SIGTERM, and SIGKILL after
# the same grace again.
DEFAULT_LIMIT_GRACE_S = 30.0
START_REPORT_DELAY_S = 0.1
# An exit goes out at once, unless members launched less than EXIT_COMPANY_S ago still run (a
# burst of short jobs): then it waits up to EXIT_REPORT_DELAY_S for their exits, so one report
# carries the burst's exits instead of one report each. The last of them goes at once. Reports
# whose time came while the agent was busy (a round's launches outlasting START_REPORT_DELAY_S:
# 8 launches of ~22 ms each with a cgroup and `setpriv`) wait the same, once, when the round that
# finds them due also finds exits with such members still running: without it the burst went
# in two contacts, its starts and first exits, then the rest a few ms later. So an exit waits at
# most EXIT_REPORT_DELAY_S after the round that saw it, and a start at most START_REPORT_DELAY_S
# after its launch or, when its round outlasted that, EXIT_REPORT_DELAY_S after the next round.
EXIT_REPORT_DELAY_S = 0.05
EXIT_COMPANY_S = 1.0
FINISHED_MEMORY = 4096
RETRY_S = 0.5
# A registration the control plane refused (wrong or missing bootstrap secret) is retried this
# slowly: only an operator's fix helps.
REGISTER_REFUSED_RETRY_S = 30.0
#: The file in a node's state directory (`<state-dir>/<node>/`) where the agent keeps what the
#: control plane refused of its contacts (one JSON line an element), for an operator to read.
REFUSED_FILE = "refused.jsonl"
#: Beyond this size the refused elements are logged, no longer written: a node that keeps being
#: refused must not fill its disk.
REFUSED_FILE_MAX_BYTES = 64 * 1024 * 1024
# A field a 400 names inside one element of a contact: `reports.3.message`, `logs.0.text`,
# `reports.3` (the report as a whole).
_ELEMENT = re.compile(r"(reports|logs)\.(\d+)(?:\.|$)")
# Reports whose loss would leave a run unsettled on the control plane: refused, they go again
# once without what was refused (`NodeAgent._ending_again`).
_ENDINGS = ("exited", "lost", "refused")
#: The least time a call is given while runs are held (`NodeAgent.self_fence_in`): a deadline
#: that close is passed by the round after the call in any case.
CALL_FLOOR_S = 0.2
#: The most launches a registration names (the control plane's bound on a list of generations).
MAX_LAUNCHED_NAMED = 4096
# Reports that tell the control plane a run was launched here: taken, the launch journal forgets it.
_KNOWN_LAUNCHED = ("started", "exited", "lost")


@dataclass(frozen=True)
class AskAgain:
    """How long an agent waits before asking the control plane again after it said "not now"
    (a retired node, a throttle), the one rule for both: as long as it said (its Retry-After),
    kept within `told_least_s`..`told_most_s` so a misconfigured server can neither make it spin
    nor silence it for hours; if it said nothing, `first_s` doubling with each refusal in a row
    up to `most_s`. Each wait is then lengthened by up to `jitter` of itself, never shortened, so
    agents told at once (a fleet behind one address) do not all come back at once."""

    first_s: float
    most_s: float
    told_least_s: float
    told_most_s: float
    jitter: float = 0.0

    def wait_s(self, told_s: float | None, refusals: int, spread: Callable[[], float] = random.random) -> float:
        """The wait after the `refusals`-th refusal in a row, `told_s` being the control plane's
        Retry-After (None: it said none); `spread` draws the jitter, 0 to 1."""
        if told_s is not None:
            wait = min(self.told_most_s, max(self.told_least_s, told_s))
        else:
            wait = min(self.most_s, self.first_s * 2 ** max(0, min(refusals - 1, 16)))
        return wait * (1.0 + self.jitter * min(1.0, max(0.0, spread()))) if self.jitter else wait


# A retired node's agent (the control plane answers 409 node_retired) asks again as late as the
# control plane's Retry-After says (as long as the node has been retired: 1 to 15 min by
# default, QM_RETIRED_RETRY_AFTER_MIN_S/_MAX_S), kept within 30 s..1 h; a control plane that
# says nothing gets a doubling wait from 1 min up to 15 min. Only an admin's "return to service"
# helps, and the agent then registers on its own: within the last wait of the return.
RETIRED_RETRY_S = 60.0
RETIRED_RETRY_MIN_S = 30.0
RETIRED_RETRY_MAX_S = 900.0
RETIRED_TOLD_MAX_S = 3600.0
RETIRED = AskAgain(first_s=RETIRED_RETRY_S, most_s=RETIRED_RETRY_MAX_S, told_least_s=RETIRED_RETRY_MIN_S,
                   told_most_s=RETIRED_TOLD_MAX_S)
# A throttled agent (429: too many failed agent authentications from its address,
# QM_AGENT_AUTH_FAILURES, or a proxy's rate limit) sends nothing more to the control plane until
# the Retry-After has passed (at least 1 s: "0" must not make it spin; at most 1 h: the
# throttle's window is one period of QM_AGENT_AUTH_FAILURES, an hour or less unless an operator
# counts by the day), plus up to a fifth more so a fleet behind one address comes back spread
# out. Said nothing: 1, 2, 4 … s up to a minute, jittered the same. Its runs go on meanwhile: the
# lease decides, as when the control plane cannot be reached.
THROTTLED_RETRY_S = 1.0
THROTTLED_RETRY_MAX_S = 60.0
THROTTLED_TOLD_MAX_S = 3600.0
THROTTLED = AskAgain(first_s=THROTTLED_RETRY_S, most_s=THROTTLED_RETRY_MAX_S, told_least_s=THROTTLED_RETRY_S,
                     told_most_s=THROTTLED_TOLD_MAX_S, jitter=0.2)
# A registered agent told to wait longer than what is left of its lease does not wait that long:
# the control plane is busy, not gone, and a heartbeat it takes keeps the node's jobs, where
# the full wait would end in the self-fence (until 6 Dec it did: a load balancer's one "503,
# Retry-After: 30" killed every job of a node with a 20 s lease). It asks again at its
# self-fence deadline less the same margin again (max(1 s, 10 % of the lease): room for one
# more try, a second later, should that one be throttled too), never sooner than
# LEASE_KEEPING_FLOOR_S after the answer, so a busy control plane gets at most a few such tries
# a lease. Only a lease that lapses without a contact taken fences.
LEASE_KEEPING_FLOOR_S = THROTTLED_RETRY_S


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:.0f} s"


DEFAULT_INTERVAL_S = 2.0


def iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, tz=timezone.utc).isoformat()


@dataclass
class NodeInventory:
    name: str
    gpu_count: int
    pool: str | None = None
    gpu_type: str | None = None
    cpus: int | None = None
    memory_gb: int | None = None
    leaf_switch: str | None = None
    spine: str | None = None
    capacity_tier: str | None = None
    simulated: bool = False
    devices: list[dict[str, Any]] = field(default_factory=list)
    host: str = ""  # the host the agent runs on (inventory.host_identity), said at registration

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name, "gpu_count": self.gpu_count, "simulated": self.simulated}
        if self.host:
            body["host"] = self.host
        for key in ("pool", "gpu_type", "cpus", "memory_gb", "leaf_switch", "spine", "capacity_tier"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        if self.devices:
            body["devices"] = self.devices
        return body


@dataclass
class Call:
    """One request an agent wants to make: register, heartbeat (renews the lease) or report."""

    kind: str
    body: dict[str, Any]
    sent: float
    reports: list[dict[str, Any]]
    logs: list[Chunk] = field(default_factory=list)  # the output chunks in `body` (see agent/logs.py)
    part: Part | None = None  # the part of a refused contact it carries (`NodeAgent.parts`)


@dataclass
class Part:
    """Some of the reports and output chunks of a contact the control plane refused with a 400
    naming none of them: sent apart from the rest to find what it refuses (`NodeAgent.parts`)."""

    reports: list[dict[str, Any]]
    logs: list[Chunk]

    @property
    def size(self) -> int:
        return len(self.reports) + len(self.logs)

    def halves(self) -> list[Part]:
        elements: list[tuple[str, Any]] = [("reports", r) for r in self.reports] + [("logs", c) for c in self.logs]
        middle = len(elements) // 2
        return [Part([e for k, e in half if k == "reports"], [e for k, e in half if k == "logs"])
                for half in (elements[:middle], elements[middle:])]


@dataclass
class Running:
    assignment: Assignment
    member: Member
    started_wall: float
    sample_from_wall: float
    started_clock: float = 0.0
    sampled_steps: int = 0
    sampled_tokens: int = 0
    # (steps, useful tokens, last checkpoint) as last reported
    reported_progress: tuple[int, int, float | None] = (0, 0, None)
    stop_kind: str | None = None  # release | limit | stale | lease | shutdown | refused
    kill_at: float | None = None
    # The agent's own runtime-limit deadline (monotonic): launch + limit + limit grace.
    limit_at: float | None = None


class NodeAgent:
    def __init__(
        self,
        inventory: NodeInventory,
        *,
        client: AgentClient,
        launcher: Launcher,
        bootstrap_token: str = "",
        token: str = "",
        interval_s: float | None = None,
        sample_interval_s: float = 10.0,
        self_fence: bool = True,
        exits_wake: bool = False,
        limit_grace_s: float = DEFAULT_LIMIT_GRACE_S,
        keep_desired: bool = True,
        ship_output: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        refused_path: Path | None = None,
        launch_journal: LaunchJournal | None = None,
    ) -> None:
        self.inventory = inventory
        self.name = inventory.name
        self.client = client
        self.launcher = launcher
        self.bootstrap_token = bootstrap_token
        self.token = token
        self.interval_override = interval_s
        self.interval_s = interval_s or DEFAULT_INTERVAL_S
        self.sample_interval_s = sample_interval_s
        self.self_fence = self_fence
        # True when the caller wakes the agent as soon as a process exits (SIGCHLD, see
        # main.run_real): members then need no polling every 50 ms to be reaped promptly.
        self.exits_wake = exits_wake
        self.limit_grace_s = limit_grace_s
        self.clock = clock
        self.wall = wall
        self.log = log.bind(node=self.name)

        self.registered = False
        self.lease_s = 0.0
        self.lease_valid_until = 0.0
        self.node_state = "unknown"
        # Since when (this agent's clock) the control plane refuses it as retired, and how often.
        self.retired_since: float | None = None
        self.retired_refusals = 0
        # Since when it has been throttled (429) without a reply in between, and how often.
        self.throttled_since: float | None = None
        self.throttled_refusals = 0
        self.throttle_cut_short = False  # a wait of this throttle was cut short to keep the lease (said once)
        self.members: dict[int, Running] = {}
        self.finished: OrderedDict[int, int | None] = OrderedDict()
        self.refused: set[int] = set()
        self.highest_generation: dict[int, int] = {}
        self.outbox: list[dict[str, Any]] = []
        self.shipper = LogShipper()  # each rank's output, shipped with the contacts
        # Where what the control plane refused of a contact is kept (REFUSED_FILE; None: only
        # logged), and the parts of a contact refused whole still to be sent apart (`_refused`).
        self.refused_path = refused_path
        # What this node's agents launched that the control plane may not know of (its start
        # or end not yet taken): named at registration, never to be started again (launch_journal.py).
        self.journal = launch_journal if launch_journal is not None else LaunchJournal()
        self.parts: list[Part] = []
        self.replaced: set[tuple[str, int, str]] = set()  # endings refused and sent again (`_ending_again`)
        self.ship_output = ship_output  # False: the output stays on the node (--no-output)
        # The desired allocations of the last full reply and their version: sent back as
        # `known`, so while nothing concerning this node changed the control plane answers
        # `unchanged` without building them again, and these are applied once more.
        self.keep_desired = keep_desired
        self.known_version: str | None = None
        self.known_allocations: list[dict[str, Any]] = []
        self.next_contact = 0.0
        # No call to the control plane before this (this agent's clock), however urgent: the wait
        # after a refused registration, a retired node's, a throttle's (its Retry-After).
        self.not_before = 0.0
        self.next_sample = 0.0
        self.urgent = False
        # Set by the wake-up thread (another thread): the control plane has news for this node.
        # Consumed at the start of a round, so a wake-up arriving mid-round is never lost.
        self.wake_requested = False
        self.report_at = math.inf  # when the queued reports must go out at the latest
        # The queued reports, found due, were held once for the rest of a burst's exits (`_reap`).
        self.report_held = False
        self.partitioned = False  # tests and demos: drop all traffic, keep running
        self.shutting_down = False
        self.self_fenced_at: float | None = None
        # The ends of runs a previous agent left untold were sent (or given up on): see begin().
        self.handed_over = False
        # A self-fence the control plane has not heard of yet: the next registration says when
        # (its jobs' history then reads "stopped answering", not "agent restarted").
        self.self_fence_untold: float | None = None
        self.counters = {"launched": 0, "exited": 0, "refused": 0, "stale_killed": 0, "self_fenced": 0,
                         "limit_stopped": 0, "prefetched": 0, "set_aside": 0}
        self.round_trips: list[float] = []  # seconds per call since the caller last drained them
        # Desired states that came with a wake-up (WakeListener, another thread): (the value of
        # `held_changes` when the wait was sent, the reply). Applied by the next round only if
        # what the agent holds has not changed since (every reply taken since said "unchanged"
        # for the version it held then), so an older desired state never overrides a newer one.
        self.held_changes = 0
        self.prefetched: tuple[int, dict[str, Any]] | None = None

    # ------------------------------------------------------------------------------ the round

    def step(self) -> float:
        """One round; returns how long to wait before the next one."""
        call = self.begin()
        if call is not None:
            try:
                reply = self.send(call)
            except ProtocolError as error:
                self.finish(call, error=error)
            else:
                self.finish(call, reply=reply)
        return self.end()

    def begin(self) -> Call | None:
        """Steps 1–3 of the round, and the call to make now, if any (a process simulating many
        nodes sends several nodes' calls in one request, then hands each its reply)."""
        now = self.clock()
        self._reap(now)
        self._enforce_deadlines(now)
        self._check_lease(now)
        if self.prefetched is not None:
            since, reply = self.prefetched
            self.prefetched = None
            if since == self.held_changes and self.registered and not self.partitioned:
                # The wake-up brought the desired state, read after the commit that woke us:
                # apply it as a report's reply (no lease renewal), no request needed.
                self.wake_requested = False
                self.held_changes += 1
                self.counters["prefetched"] += 1
                self.node_state = str(reply.get("node_state", self.node_state))
                self._apply(reply)
        if self.wake_requested and self.registered:
            self.wake_requested = False
            self.urgent = True
        if now >= self.report_at:
            self.report_at = math.inf
            self.urgent = True
        if self.partitioned or not (now >= self.next_contact or self.urgent or not self.registered):
            return None
        if not self.registered:
            if self.shutting_down or now < self.not_before:
                return None
            if self.members:
                # Register only once everything we stopped is really gone: registering says
                # "nothing of the past runs here", and the control plane frees GPUs on it.
                for running in self.members.values():
                    if running.stop_kind is None:
                        self._stop(running, "stale", 0.0, now)
                self.next_contact = now + 0.05
                return None
            endings = self.journal.endings()
            if endings and self.token and not self.handed_over:
                # Runs a previous agent of this node reaped and did not get to tell: told first,
                # with the node's token, so the registration finds them settled as they ended
                # (it would requeue them as lost with that agent: a job that succeeded ran again).
                return Call("report", {"running": [], "reports": endings}, sent=self.clock(), reports=endings)
            token = self.token or self.bootstrap_token
            if not token:
                self.log.error("no node token and no bootstrap secret: set QM_AGENT_BOOTSTRAP_TOKEN")
                self.next_contact = now + 30.0
                return None
            body = self.inventory.as_json()
            body["running"] = sorted(self.members)
            # Said at every registration, empty or not: it vouches that no other run was launched
            # here unknown to the control plane, so what was bound here and never started is this
            # agent's to start.
            # (The newest MAX_LAUNCHED_NAMED: the control plane takes no more. Older ones would
            # be runs fenced long since, lease after lease of unanswered contacts ago.)
            body["launched"] = self.journal.left()[-MAX_LAUNCHED_NAMED:]
            if self.self_fence_untold is not None:
                body["self_fenced_at"] = iso(self.self_fence_untold)
            return Call("register", body, sent=self.clock(), reports=[])
        if now < self.not_before:
            return None  # throttled: an exit's report waits too; the runs go on meanwhile
        part = self.parts[0] if self.parts else None
        if part is not None:
            # A refused contact's part (`_refused`): alone, the queue waits until it is through.
            reports, logs = list(part.reports), list(part.logs)
        else:
            # everything queued goes now (MAX_CONTACT_REPORTS of it: the rest right after the reply)
            reports, self.outbox = self.outbox[:MAX_CONTACT_REPORTS], self.outbox[MAX_CONTACT_REPORTS:]
            self.report_at = math.inf
            self.report_held = False
            logs = self.shipper.collect()
        body: dict[str, Any] = {"running": sorted(self.members), "reports": reports}
        if self.known_version:
            body["known"] = self.known_version
        if logs:
            body["logs"] = [chunk.as_json() for chunk in logs]
        if self.shutting_down and not self.members and not self.parts:
            body["goodbye"] = True
        elif self.shutting_down:
            # said at once, before the first job has stopped: its idle GPUs take no new work
            body["shutting_down"] = True
        # Every contact renews the lease, an urgent report included: the next heartbeat is then
        # due a whole interval later, so an agent that reports often needs no separate ones.
        return Call("heartbeat", body, sent=self.clock(), reports=reports, logs=logs, part=part)

    def send(self, call: Call) -> dict[str, Any]:
        """The call over this agent's own connection (one node, one request), given no longer
        than what is left before the self-fence (`self_fence_in`)."""
        within = getattr(self.client, "within", None)
        left = self.self_fence_in()
        if within is None or left is None:
            return self._send(call)
        with within(left):
            return self._send(call)

    def self_fence_in(self) -> float | None:
        """How long a call may take while this agent holds runs: until its self-fence deadline
        (at least CALL_FLOOR_S). None when no self-fence is due (nothing runs, or none kept).
        The round is one thread: a call that hangs on a control plane that took the request and
        never answers would hold the self-fence until its read timeout (10 s), the runs alive
        past the lease the control plane counts (until 8 Dec it did: up to 10 s, their jobs
        requeued and started elsewhere meanwhile)."""
        if not (self.self_fence and self.registered and self.members):
            return None
        return max(CALL_FLOOR_S, self.lease_valid_until - self.clock())

    def _send(self, call: Call) -> dict[str, Any]:
        if call.kind == "register":
            token = self.token or self.bootstrap_token
            try:
                return self.client.register(token, call.body)
            except Unauthorized:
                if self.token and self.bootstrap_token:
                    self.token = ""
                    return self.client.register(self.bootstrap_token, call.body)
                raise
        if call.kind == "heartbeat":
            return self.client.heartbeat(self.name, self.token, call.body)
        return self.client.report(self.name, self.token, call.body)

    def finish(self, call: Call, *, reply: dict[str, Any] | None = None, error: ProtocolError | None = None) -> None:
        """Steps 4–5: take the reply (or the failure) of `call`."""
        now = self.clock()
        if not (reply is not None and call.kind != "register" and reply.get("unchanged") and self.known_version
                and reply.get("version") == self.known_version):
            self.held_changes += 1  # anything but "unchanged" for what we hold (see `prefetched`)
        handover = call.kind == "report" and not self.registered
        if handover:
            # Told or not, once: what was not is named `launched` by the registration (requeued).
            # Only an unreachable or busy control plane is asked again.
            self.handed_over = reply is not None or not isinstance(error, Unreachable | Throttled)
            if reply is not None:
                self.journal.told({int(r["generation"]) for r in call.reports})
                self.log.info("told the ends of runs a previous agent did not get to tell",
                              generations=[r["generation"] for r in call.reports])
            else:
                self.log.warning("could not tell the ends of runs a previous agent left untold", detail=str(error))
                self.next_contact = now + (0.0 if self.handed_over else RETRY_S)
                return
            self.next_contact = now
            return
        if error is not None:
            if isinstance(error, Refused) and not isinstance(error, Retired) and self._refused(call, error, now):
                return
            if call.reports and call.part is None:
                # Not delivered (as far as we know): send them again; the server applies each
                # report idempotently, so a duplicate does no harm. (A part's stay in its part.)
                self.outbox = call.reports + self.outbox
            if isinstance(error, Unauthorized) and call.kind == "register":
                # Registration refused: the bootstrap secret is not the server's (or there is
                # none and the node token was refused). Retrying at once cannot help: retry
                # slowly, saying what to fix. (Before: "token refused; … registering again"
                # twice a second, forever, for a mistyped secret.)
                self.registered = False
                self.token = ""
                self.log.error(
                    "the control plane refused the bootstrap secret: QM_AGENT_BOOTSTRAP_TOKEN (--bootstrap-token) "
                    "is not the server's" if self.bootstrap_token else
                    "the control plane refused the node token and there is no bootstrap secret: "
                    "set QM_AGENT_BOOTSTRAP_TOKEN", detail=str(error), retry_in_s=REGISTER_REFUSED_RETRY_S)
                self.next_contact = self.not_before = now + REGISTER_REFUSED_RETRY_S
            elif isinstance(error, Unauthorized):
                self.log.warning("token refused; stopping everything and registering again", detail=str(error))
                for running in self.members.values():
                    self._stop(running, "stale", 0.0, now)
                self.registered = False
                self.token = ""
                self._forget_desired()
                self.next_contact = now + RETRY_S
            elif isinstance(error, Retired):
                # Retired by an admin: nothing runs here any more. Before 30 Nov such a refused
                # registration was sent again every round, forever (a refusal set no delay);
                # until 1 Dec every minute, with a log line each time.
                for running in self.members.values():
                    if running.stop_kind is None:
                        self._stop(running, "stale", 0.0, now)
                first = self.retired_since is None
                if first:
                    self.retired_since, self.retired_refusals = now, 0
                self.retired_refusals += 1
                wait = RETIRED.wait_s(error.retry_after_s, self.retired_refusals)
                self.registered = False
                self.token = ""
                self.node_state = "retired"
                self._forget_desired()
                # One line when it happens, not one per attempt: the next ones say nothing new.
                (self.log.error if first else self.log.debug)(
                    "node retired: the control plane refuses this agent until an admin returns the node to service; "
                    + (f"asking again as it says, in {_minutes(wait)}" if error.retry_after_s is not None
                       else f"asking again with backoff, at most every {_minutes(RETIRED_RETRY_MAX_S)}"),
                    detail=error.detail, retry_in_s=round(wait, 1),
                    retry_after_s=error.retry_after_s, attempt=self.retired_refusals, backoff_max_s=RETIRED_RETRY_MAX_S)
                self.next_contact = self.not_before = now + wait
            elif isinstance(error, Throttled):
                self._throttled(call, error, now)
            elif isinstance(error, Refused):
                self.log.error("control plane refused the request", detail=error.detail, status=error.status)
                self.next_contact = now + max(self.interval_s, 5.0)
                # Not again at the next round for an exit's urgency: it would be refused as well.
                self.urgent = False
                if call.kind == "register":
                    # Retrying an unchanged registration at once cannot help (before, nothing
                    # delayed it: it was sent again every round).
                    self.not_before = self.next_contact
            else:
                self.log.warning("control plane unreachable", detail=str(error))
                self.next_contact = now + min(self.interval_s, RETRY_S * 2)
            return
        assert reply is not None
        if call.logs:
            self.shipper.delivered(call.logs)
            if self.shipper.backlog:  # more output waits than one contact carries: send it soon
                self.report_at = min(self.report_at, now + BACKLOG_DELAY_S)
        if len(call.reports) >= MAX_CONTACT_REPORTS and self.outbox:  # so do more reports
            self.report_at = min(self.report_at, now + BACKLOG_DELAY_S)
        if len(self.round_trips) < 10_000:
            self.round_trips.append(now - call.sent)
        if self.throttled_since is not None:
            self.log.info("no longer throttled: the control plane takes this agent's requests again",
                          throttled_for_s=round(now - self.throttled_since, 1), attempts=self.throttled_refusals)
            self.throttled_since, self.throttled_refusals = None, 0
        # What the control plane took a start or end of knows it was launched (a registration
        # naming launches settled them: fenced, or no longer live).
        # (Nothing is launched between a registration and its reply: all the journal holds was named.)
        self.journal.told({int(r["generation"]) for r in call.reports if r.get("kind") in _KNOWN_LAUNCHED}
                          | set(self.journal.left() if call.kind == "register" else ()))
        if call.kind == "register":
            self._forget_desired()
            self.token = str(reply["token"])
            self.registered = True
            self.self_fence_untold = None
            self.node_state = str(reply.get("node_state", "ready"))
            self._lease_renewed(call.sent, float(reply["lease_s"]), reply.get("heartbeat_interval_s"))
            self.log.info("registered", state=self.node_state, lease_s=self.lease_s, interval_s=self.interval_s,
                          settled=reply.get("settled_generations", []))
            if self.retired_since is not None:
                self.log.info("returned to service: the control plane takes this agent again",
                              retired_for_s=round(now - self.retired_since, 1), refused_attempts=self.retired_refusals)
                self.retired_since, self.retired_refusals = None, 0
            self.next_contact = self.clock()  # pull the desired state right away
            self.urgent = True
            return
        self.urgent = False
        if call.kind == "heartbeat":
            self._lease_renewed(call.sent, float(reply["lease_s"]), reply.get("heartbeat_interval_s"))
            self.next_contact = self.clock() + self.interval_s
        if call.part is not None:
            if self.parts and self.parts[0] is call.part:
                self.parts.pop(0)
            # the next part, or what was queued meanwhile, goes at once
            self.urgent = bool(self.parts or self.outbox)
        self.node_state = str(reply.get("node_state", self.node_state))
        self._apply(reply)

    def _refused(self, call: Call, error: Refused, now: float) -> bool:
        """A 400 to a heartbeat or report: what it refuses is set aside and the rest is sent at
        once (True), so one bad element never holds back the node's lease, the other runs'
        reports and their output. False: nothing of it can be told apart (a registration, the
        contact's own fields), and it is refused as a whole, as before.

        The control plane validates a contact whole and names each element at fault
        (`reports.3.message`, `logs.0.text`): those are set aside (`_set_aside`: kept in
        REFUSED_FILE with its words, logged, never sent again). A 400 that names none of the
        contact's elements is isolated by sending the parts apart: first the contact without
        its reports and output (the heartbeat alone), then its elements in halves, a half
        refused in its turn halved again, one element refused alone set aside. Until 6 Dec the
        agent sent the same refused contact again at every round: the node's heartbeats and
        every other run's exits never got through."""
        if call.kind == "register" or error.status != 400:
            return False
        named: dict[tuple[str, int], dict[str, list[str]]] = {}
        for name, problems in error.errors.items():
            match = _ELEMENT.match(name)
            if match is None:
                continue
            kind, index = match.group(1), int(match.group(2))
            if index >= (len(call.reports) if kind == "reports" else len(call.logs)):
                named = {}  # not this contact's element: the control plane and we disagree
                break
            named.setdefault((kind, index), {})[name] = problems
        if named:
            for (kind, index), problems in sorted(named.items()):
                self._set_aside(call, kind, index, problems, error)
            reports = [r for i, r in enumerate(call.reports) if ("reports", i) not in named]
            logs = [c for i, c in enumerate(call.logs) if ("logs", i) not in named]
            if call.part is None:
                self.outbox = reports + self.outbox  # the output left stays in the shipper's flight
            elif reports or logs:
                call.part.reports, call.part.logs = reports, logs
            elif self.parts and self.parts[0] is call.part:
                self.parts.pop(0)
        elif call.part is None:
            whole = Part(list(call.reports), list(call.logs))
            if not whole.size:
                return False  # the heartbeat itself: nothing to set aside
            self.log.warning("the control plane refused a contact without naming what it refuses: sending its "
                             "parts apart to find it", detail=error.detail, reports=len(call.reports),
                             chunks=len(call.logs))
            self.parts = [Part([], []), *whole.halves()] if whole.size > 1 else [Part([], []), whole]
        elif not call.part.size:
            # The heartbeat alone is refused: its own fields are at fault, not an element. The
            # parts go back to the queue (the output never left the shipper's flight), and the
            # contact is refused as a whole, as before.
            self.outbox = [r for p in self.parts for r in p.reports] + self.outbox
            self.parts = []
            return False
        elif call.part.size == 1:
            kind, index = ("reports", 0) if call.part.reports else ("logs", 0)
            self._set_aside(call, kind, index, {}, error)
            self.parts.pop(0)
        else:
            self.parts[0:1] = call.part.halves()
        self.next_contact = now
        self.urgent = True
        return True

    def _set_aside(self, call: Call, kind: str, index: int, problems: dict[str, list[str]], error: Refused) -> None:
        """Element `index` of the call's reports or output chunks (`kind`), refused by the control
        plane for `problems` (its field → its words; {} when it named none): never sent again,
        kept in REFUSED_FILE with the control plane's words for an operator to read, and logged
        once. A run's ending (exited, lost, refused) goes again once without what was refused
        (`_ending_again`), so the control plane still settles the run."""
        wall = self.wall()
        if kind == "reports":
            data = call.reports[index]
            generation, what = data.get("generation"), data.get("kind")
        else:
            chunk = call.logs[index]
            self.shipper.refused(chunk)
            data, generation, what = chunk.as_json(), chunk.generation, "output"
        self.counters["set_aside"] += 1
        field, problem = next(iter(problems.items()), (None, [error.detail]))
        again = None
        if kind == "reports" and what in _ENDINGS:
            again = self._ending_again(data, problems, error)
            if again is not None:
                self._queue(again)
        kept = self._keep_refused({
            "at": iso(wall), "node": self.name, "call": call.kind, "status": error.status,
            "element": f"{kind}.{index}", "kind": what, "generation": generation, "errors": problems,
            "detail": error.detail, "sent_again": again, "data": data,
        })
        self.log.error("the control plane refused part of a contact: set aside, kept on the node and never sent again",
                       generation=generation, kind=what, element=f"{kind}.{index}", field=field,
                       problem=" ".join(problem), kept_in=kept, sent_again=again is not None)

    def _ending_again(self, report: dict[str, Any], problems: dict[str, list[str]],
                      error: Refused) -> dict[str, Any] | None:
        """A refused ending (exited, lost, refused) as the control plane takes it: without the
        fields it refused (or, when it named none, the agent's own words and its instant, taken
        anew), once; None for an ending already sent again. Lost, it would leave the run bound
        there for ever: this agent ignores a run it has seen end, whatever it is then told."""
        generation = report.get("generation")
        if type(generation) is not int:
            return None
        key = (str(report.get("kind")), generation, str(report.get("at")))
        if key in self.replaced:
            return None
        self.replaced.add(key)
        refused = {name.rsplit(".", 1)[-1] for name in problems} if problems else {"message", "at"}
        again: dict[str, Any] = {"kind": report["kind"], "generation": generation,
                                 "at": report.get("at") if "at" not in refused else iso(self.wall())}
        if "exit_code" in report:
            code = report["exit_code"]
            again["exit_code"] = code if type(code) is int and -255 <= code <= 255 and "exit_code" not in refused else None
        if "message" in refused or not isinstance(report.get("message", ""), str):
            said = "; ".join(f"{name}: {' '.join(p)}" for name, p in problems.items()) or error.detail
            words = (f"the control plane refused this report as the agent first sent it ({said}); sent again "
                     f"without what it refused, the original kept on the node in {REFUSED_FILE}")
            again["message"] = words.encode("ascii", "replace").decode()[:500]
        elif "message" in report:
            again["message"] = report["message"]
        return again

    def _keep_refused(self, entry: dict[str, Any]) -> str | None:
        """Append `entry` to REFUSED_FILE (mode 0600, a regular file only: the state directory is
        its jobs' to change); the path, or None when there is none or it could not be written."""
        if self.refused_path is None:
            return None
        line = (json.dumps(entry, default=str) + "\n").encode()
        try:
            self.refused_path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_regular(self.refused_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if os.fstat(fd).st_size + len(line) > REFUSED_FILE_MAX_BYTES:
                    self.log.error("the file of refused elements is full: this one is logged only",
                                   path=str(self.refused_path), max_bytes=REFUSED_FILE_MAX_BYTES)
                    return None
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as failure:
            self.log.error("could not keep a refused element on the node", path=str(self.refused_path),
                           error=str(failure))
            return None
        return str(self.refused_path)

    def _throttled(self, call: Call, error: Throttled, now: float) -> None:
        """A 429: "slow down", not a refusal of the request; or a 502/503/504 with a Retry-After:
        "not now, ask again then" (client.py). Nothing is stopped and the node stays registered;
        no call of any kind goes before the wait is over (until 6 Dec a 429 was a refusal: asked
        again 5 s later whatever Retry-After said; a 503 with Retry-After was unreachable: asked
        again within a second). A wait that would outlast the lease is cut short so the lease is
        kept (LEASE_KEEPING_FLOOR_S): the lease decides only when the control plane keeps
        refusing until it lapses."""
        first = self.throttled_since is None
        if first:
            self.throttled_since, self.throttled_refusals = now, 0
            self.throttle_cut_short = False
        self.throttled_refusals += 1
        told_wait = wait = THROTTLED.wait_s(error.retry_after_s, self.throttled_refusals)
        lease_left = self.lease_valid_until - now if self.registered else None
        if lease_left is not None and lease_left > 0:  # once it has lapsed there is none to keep
            keep_by = lease_left - max(1.0, 0.1 * self.lease_s)
            wait = min(told_wait, max(LEASE_KEEPING_FLOOR_S, keep_by))
        cut_short = wait < told_wait
        said = ("throttled: the control plane asks this agent to slow down; " if error.status == 429 else
                f"throttled: the control plane cannot serve this agent now (HTTP {error.status}) and says when to "
                "ask again; ")
        if cut_short:
            said += (f"asking again before its lease runs out, in {_minutes(wait)}, not in {_minutes(told_wait)}: "
                     "waiting that long would let the lease lapse" + (" and fence its jobs" if self.members else ""))
        elif error.retry_after_s is not None:
            said += f"asking again as it says, in {_minutes(wait)}"
        else:
            said += f"asking again with backoff, in {_minutes(wait)}"
        # One warning when it starts, and one the first time a wait is cut short to keep the lease;
        # not one per attempt: "no longer throttled" says when it ends.
        loud = first or (cut_short and not self.throttle_cut_short)
        self.throttle_cut_short = self.throttle_cut_short or cut_short
        (self.log.warning if loud else self.log.debug)(
            said, call=call.kind, detail=error.detail, status=error.status, retry_in_s=round(wait, 2),
            retry_after_s=error.retry_after_s, attempt=self.throttled_refusals,
            lease_left_s=None if lease_left is None else round(lease_left, 2),
            **({"told_wait_s": round(told_wait, 2)} if cut_short else {}))
        self.next_contact = self.not_before = now + wait

    def end(self) -> float:
        """Step 6, and how long to wait before the next round."""
        now = self.clock()
        if now >= self.next_sample and self.members:
            self._sample(now)
            self.next_sample = now + self.sample_interval_s
        return self._next_wait(self.clock())

    def _next_wait(self, now: float) -> float:
        wakes = [self.next_contact - now, self.report_at - now]
        for running in self.members.values():
            upcoming = running.member.next_event_in()
            if upcoming is not None:
                wakes.append(upcoming)
            elif not self.exits_wake:
                wakes.append(0.05)
            if running.kill_at is not None:
                wakes.append(running.kill_at - now)
            if running.limit_at is not None and running.stop_kind is None:
                wakes.append(running.limit_at - now)
        if self.members and self.self_fence and self.registered:
            wakes.append(self.lease_valid_until - now)
        if self.members:
            wakes.append(self.next_sample - now)
        return max(0.0, min(wakes))

    def recover_output(self, runs: list[Unshipped]) -> None:
        """Ship the output a previous agent of this node left unsent (agent/logs.py): runs that
        ended with it, whose processes are gone; forgotten once all of it was taken."""
        if not self.ship_output:
            return
        for run in runs:
            self.shipper.recover(run)
        if runs:
            self.log.info("shipping the output a previous agent left unsent",
                          generations=[run.generation for run in runs],
                          bytes=sum(max(0, sent - shipped) for run in runs for shipped, sent in run.ranks.values()))

    # ------------------------------------------------------------------------------ members

    def _reap(self, now: float) -> None:
        wall = self.wall()
        ended = False
        for generation, running in list(self.members.items()):
            code = running.member.poll()
            if code is None:
                continue
            del self.members[generation]
            self._remember_finished(generation, code)
            self.shipper.ended(generation)  # its last output goes with the exit, the rest after
            self.counters["exited"] += 1
            self._final_sample(running, wall)
            # `exited`: the job ended by itself or as the control plane asked (its exit code
            # decides its fate). `lost`: we stopped it for a reason that is not the job's own
            # (lease lost, shutdown, stale, refused), so it must be requeued, never failed.
            kind = "exited" if running.stop_kind in (None, "release", "limit") else "lost"
            ending = {"kind": kind, "generation": generation, "at": iso(wall), "exit_code": code,
                      "message": f"stopped: {running.stop_kind}" if running.stop_kind else ""}
            self._queue(ending)
            # Kept on the disk until told: a successor tells it if this agent dies first.
            self.journal.ended(generation, ending)
            ended = True
            self.log.info("member ended", generation=generation, job=running.assignment.job_id, exit_code=code,
                          stop=running.stop_kind)
        if ended:
            if any(now - r.started_clock < EXIT_COMPANY_S for r in self.members.values()):
                if self.report_at <= now and not self.report_held:
                    # Due while this agent was busy (its last round's launches): the rest of the
                    # burst is ending now, so what is due waits for it, once (EXIT_REPORT_DELAY_S).
                    self.report_held = True
                    self.report_at = now + EXIT_REPORT_DELAY_S
                else:
                    self.report_at = min(self.report_at, now + EXIT_REPORT_DELAY_S)
            else:
                self.urgent = True

    def _remember_finished(self, generation: int, code: int | None) -> None:
        self.finished[generation] = code
        while len(self.finished) > FINISHED_MEMORY:
            self.finished.popitem(last=False)

    def _enforce_deadlines(self, now: float) -> None:
        for generation, running in self.members.items():
            if running.kill_at is not None and now >= running.kill_at:
                running.member.kill()
                running.kill_at = None
            if running.limit_at is not None and now >= running.limit_at and running.stop_kind is None:
                # Nobody told us to stop it by its runtime limit and the grace after it: the
                # control plane is unreachable or its loop is down. Enforce the limit here.
                self.log.warning("runtime limit passed without a stop from the control plane; stopping it",
                                 generation=generation, job=running.assignment.job_id,
                                 runtime_limit_s=running.assignment.runtime_limit_s, grace_s=self.limit_grace_s)
                self.counters["limit_stopped"] += 1
                self._stop(running, "limit", self.limit_grace_s, now)

    def _stop(self, running: Running, kind: str, grace_s: float, now: float) -> None:
        """SIGTERM now and SIGKILL after `grace_s` (0: SIGKILL at once). A later, harsher stop
        can shorten an earlier one, never lengthen it."""
        if running.stop_kind is None or kind in ("lease", "stale", "refused"):
            running.stop_kind = kind
        if grace_s <= 0:
            running.member.kill()
            running.kill_at = None
            return
        if running.kill_at is None:
            running.member.terminate()
            running.kill_at = now + grace_s
        else:
            running.kill_at = min(running.kill_at, now + grace_s)

    def _check_lease(self, now: float) -> None:
        if not (self.self_fence and self.registered and self.members):
            return
        if now < self.lease_valid_until:
            return
        # The lease is lost as far as we can know: the control plane may fence these
        # allocations and hand the GPUs to someone else. Nothing of ours may run then.
        self.counters["self_fenced"] += 1
        self.self_fenced_at = self.wall()
        self.self_fence_untold = self.self_fenced_at
        self.log.warning("self-fenced: lease not renewed in time, killing every member",
                         members=sorted(self.members), lease_s=self.lease_s, at=iso(self.self_fenced_at))
        for running in self.members.values():
            self._stop(running, "lease", 0.0, now)
        self.registered = False
        self.held_changes += 1

    # ------------------------------------------------------------------------------ talking

    def _queue(self, report: dict[str, Any]) -> None:
        self.outbox.append(report)
        if len(self.outbox) > MAX_OUTBOX:
            # Keep exits and starts; shed the oldest samples first.
            samples = [i for i, r in enumerate(self.outbox) if r["kind"] in ("sample", "progress")]
            for i in reversed(samples[: len(self.outbox) - MAX_OUTBOX]):
                del self.outbox[i]

    def _lease_renewed(self, sent: float, lease_s: float, interval: Any) -> None:
        self.lease_s = lease_s
        margin = max(1.0, 0.1 * lease_s)
        self.lease_valid_until = sent + lease_s - margin
        if self.interval_override is None and interval:
            self.interval_s = float(interval)

    # ------------------------------------------------------------------------------ desired

    def _apply(self, reply: dict[str, Any]) -> None:
        now = self.clock()
        if reply.get("reregister"):
            if self.shutting_down and not self.members:
                # The answer to our goodbye: the node is down until an agent registers it again.
                self.log.info("goodbye taken: the node is down until an agent registers it again",
                              state=reply.get("node_state"))
            else:
                self.log.warning("control plane says this node must register again; stopping everything",
                                 state=reply.get("node_state"), running=sorted(self.members))
            for running in self.members.values():
                self._stop(running, "stale", 0.0, now)
            self.registered = False
            self._forget_desired()
            self.next_contact = now
            return
        if reply.get("unchanged"):
            if self.known_version is None or reply.get("version") != self.known_version:
                # Not the version we hold (cannot happen with one call at a time): apply only
                # the stops, and ask for the whole desired state at once.
                for generation in reply.get("stop", []):
                    running = self.members.get(int(generation))
                    if running is not None:
                        self.counters["stale_killed"] += 1
                        self._stop(running, "stale", 0.0, now)
                self._forget_desired()
                self.next_contact = now
                return
            allocations = self.known_allocations  # nothing concerning this node changed since
        else:
            allocations = list(reply.get("allocations", []))
            version = reply.get("version")
            self.known_version = str(version) if version and self.keep_desired else None
            # Never keep a releasing allocation: its grace is counted from the reply.
            if any(a.get("state") != "active" for a in allocations):
                self.known_version = None
            self.known_allocations = allocations if self.known_version else []
        desired = [Assignment.from_json(a) for a in allocations]
        wanted = {a.generation for a in desired}
        for generation in reply.get("stop", []):
            running = self.members.get(int(generation))
            if running is not None:
                self.counters["stale_killed"] += 1
                self.log.warning("stopping stale generation", generation=generation)
                self._stop(running, "stale", 0.0, now)
        for generation, running in self.members.items():
            if generation not in wanted and running.stop_kind != "stale":
                self.counters["stale_killed"] += 1
                self.log.warning("stopping generation the control plane no longer lists", generation=generation)
                self._stop(running, "stale", 0.0, now)
        for assignment in desired:
            self._apply_one(assignment, now)

    def _forget_desired(self) -> None:
        self.known_version = None
        self.known_allocations = []

    def _apply_one(self, assignment: Assignment, now: float) -> None:
        generation = assignment.generation
        if generation in self.refused:
            return
        newest = max((self.highest_generation.get(g, 0) for g in assignment.gpus), default=0)
        if generation < newest:
            self.refused.add(generation)
            self.counters["refused"] += 1
            self.log.warning("refusing stale generation", generation=generation, newest_seen=newest,
                             gpus=list(assignment.gpus))
            self._queue({"kind": "refused", "generation": generation, "at": iso(self.wall()),
                         "message": f"generation {newest} was already seen on these GPUs"})
            self.urgent = True
            running = self.members.get(generation)
            if running is not None:
                self._stop(running, "refused", 0.0, now)
            return
        for gpu in assignment.gpus:
            self.highest_generation[gpu] = max(self.highest_generation.get(gpu, 0), generation)
        running = self.members.get(generation)
        if running is not None:
            # The limit may have been changed since the launch: keep the latest.
            running.limit_at = self._limit_deadline(running.started_clock, assignment)
            if assignment.state == "releasing" and assignment.release is not None:
                if running.stop_kind is None:
                    self.log.info("stopping on request", generation=generation, reason=assignment.release.reason,
                                  grace_s=assignment.release.grace_remaining_s)
                self._stop(running, "release", assignment.release.grace_remaining_s, now)
            return
        if generation in self.finished:
            return  # it ran here and ended; the control plane will settle it from our report
        if assignment.state != "active":
            # Asked to stop something we never started: confirm nothing of it runs here.
            self._remember_finished(generation, None)
            self._queue({"kind": "exited", "generation": generation, "at": iso(self.wall()), "exit_code": None,
                         "message": "never started on this node"})
            self.urgent = True
            return
        if self.shutting_down:
            # Bound here while this agent stops its jobs to shut down (the node is ready until
            # the goodbye): never launched, or it would outlive the shutdown. Refused at once as
            # stopped for the shutdown, so the control plane requeues it as the node going away.
            self.refused.add(generation)
            self.counters["refused"] += 1
            self.log.info("refusing work bound during shutdown", generation=generation, gpus=list(assignment.gpus))
            self._queue({"kind": "refused", "generation": generation, "at": iso(self.wall()),
                         "message": "stopped: shutdown"})
            self.urgent = True
            return
        holders = [r for g, r in self.members.items() if set(r.assignment.gpus) & set(assignment.gpus)]
        if holders:
            for older in holders:
                self.log.warning("an older generation still holds the GPUs; killing it before launching",
                                 older=older.assignment.generation, newer=generation)
                self._stop(older, "stale", 0.0, now)
            self.next_contact = min(self.next_contact, now + 0.1)
            return
        self._launch(assignment)

    def _launch(self, assignment: Assignment) -> None:
        wall = self.wall()
        try:
            # Kept before the first process exists: an agent that dies after this point leaves
            # the launch for its successor to name (launch_journal.py). One that cannot be kept
            # fails the launch, as a run directory that cannot be written does.
            self.journal.record(assignment.generation)
            member = self.launcher.launch(assignment)
        except Exception as error:  # noqa: BLE001 - whatever stops one run's launch is that run's end, not the agent's
            # The launcher has killed what it started of the run and removed its cgroup
            # (ProcessMember._abandon_launch). Before 5 Dec only OSError was caught here: a job
            # whose env has a name with '=' in it (ValueError from subprocess) went up out of
            # the round and `qm-agent` exited; its reaper killed every other run on the node.
            reason = str(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
            # OSError, ValueError (UnicodeError too): what the run asked cannot be done here. Any
            # other error is the agent's own: its traceback goes to the log.
            self.log.error("could not launch", generation=assignment.generation, job=assignment.job_id,
                           error=reason, exc_info=not isinstance(error, OSError | ValueError))
            self._remember_finished(assignment.generation, 126)
            ending = {"kind": "exited", "generation": assignment.generation, "at": iso(wall), "exit_code": 126,
                      "message": f"launch failed: {reason}"[:500]}
            self._queue(ending)
            self.journal.ended(assignment.generation, ending)
            self.urgent = True
            return
        started = self.clock()
        self.members[assignment.generation] = Running(assignment=assignment, member=member, started_wall=wall,
                                                      sample_from_wall=wall, started_clock=started,
                                                      limit_at=self._limit_deadline(started, assignment))
        self.counters["launched"] += 1
        if self.ship_output:
            self.shipper.watch(assignment.generation, member)
        self._queue({"kind": "started", "generation": assignment.generation, "at": iso(wall)})
        # Not at once: a start waits up to START_REPORT_DELAY_S for company (the other members
        # launched in this round, a short job's exit), so one request carries them all.
        self.report_at = min(self.report_at, self.clock() + START_REPORT_DELAY_S)
        self.log.info("launched", what=describe(assignment))

    def _limit_deadline(self, started: float, assignment: Assignment) -> float | None:
        if not assignment.runtime_limit_s:
            return None
        return started + assignment.runtime_limit_s + self.limit_grace_s

    # ------------------------------------------------------------------------------ samples

    def _sample(self, now: float) -> None:
        wall = self.wall()
        for running in self.members.values():
            self._sample_one(running, wall)

    def _sample_one(self, running: Running, wall: float) -> None:
        if wall <= running.sample_from_wall:
            return
        progress = running.member.progress()
        activity = running.member.activity()
        rank_zero = running.assignment.hosts_rank_zero
        steps = progress.steps if rank_zero else 0
        tokens = progress.useful_tokens if rank_zero else 0
        generation = running.assignment.generation
        self._queue({
            "kind": "sample", "generation": generation, "started_at": iso(running.sample_from_wall), "at": iso(wall),
            "gpu_activity": 0.0 if activity is None else round(activity, 4),
            "steps": max(0, steps - running.sampled_steps), "useful_tokens": max(0, tokens - running.sampled_tokens),
        })
        running.sample_from_wall = wall
        running.sampled_steps, running.sampled_tokens = max(steps, running.sampled_steps), max(
            tokens, running.sampled_tokens)
        # Progress only when the job has written some since the last report: a job that writes
        # none (most short jobs) costs the control plane no progress update per job.
        moved = (progress.steps, progress.useful_tokens, progress.last_checkpoint_at)
        if rank_zero and moved != running.reported_progress and moved != (0, 0, None):
            report: dict[str, Any] = {"kind": "progress", "generation": generation, "at": iso(wall),
                                      "steps": progress.steps, "useful_tokens": progress.useful_tokens}
            if progress.last_checkpoint_at is not None:
                report["last_checkpoint_at"] = iso(progress.last_checkpoint_at)
            self._queue(report)
            running.reported_progress = moved

    def _final_sample(self, running: Running, wall: float) -> None:
        self._sample_one(running, wall)

    # ------------------------------------------------------------------------------ lifecycle

    def shutdown(self, grace_s: float) -> None:
        """Stop every member (SIGTERM, then SIGKILL after `grace_s`) and say goodbye."""
        self.shutting_down = True
        now = self.clock()
        for running in self.members.values():
            self._stop(running, "shutdown", grace_s, now)
        self.urgent = True

    @property
    def busy(self) -> bool:
        """Reports are queued or due soon, or members launched in the last EXIT_COMPANY_S still
        run (short jobs whose exits are coming). Read from the wake-up thread: a hint, not a lock."""
        if self.outbox or self.parts or self.urgent or self.report_at != math.inf:
            return True
        now = self.clock()
        try:
            return any(now - r.started_clock < EXIT_COMPANY_S for r in list(self.members.values()))
        except RuntimeError:  # changed while we looked
            return True

    @property
    def done(self) -> bool:
        """Shut down: nothing runs and the control plane has taken the goodbye (or refused us,
        in which case there is nobody left to tell)."""
        return self.shutting_down and not self.members and not self.registered


def install_partition_signals(agents: list[NodeAgent]) -> None:
    """SIGUSR1 cuts these nodes off the network (their jobs keep running), SIGUSR2 heals.
    Used by the chaos tests and demos to play a network partition without root."""

    def cut(signum: int, frame: object) -> None:
        for agent in agents:
            agent.partitioned = True
            agent.log.warning("partitioned: no traffic until SIGUSR2")

    def heal(signum: int, frame: object) -> None:
        for agent in agents:
            agent.partitioned = False
            agent.urgent = True
            agent.log.warning("partition healed")

    signal.signal(signal.SIGUSR1, cut)
    signal.signal(signal.SIGUSR2, heal)


class WakeListener(threading.Thread):
    """Holds a long poll (POST nodes/wait) for `agents` and, when the control plane says it has
    news for some of them (work bound, a stop asked), marks them and calls `poke` so their
    rounds run now instead of at their next heartbeat. Only latency rides on it: if the
    control plane or Redis cannot answer, it backs off and the heartbeats carry on."""

    def __init__(self, agents: list[NodeAgent], client: AgentClient, poke: Callable[[list[NodeAgent]], None],
                 stop: threading.Event, timeout_s: float = 20.0, desired: bool = False) -> None:
        super().__init__(name="wake-listener", daemon=True)
        self.agents = agents
        # Ask for the woken nodes' desired state with the wake-up itself (saves each woken agent
        # the request that would fetch it).
        self.desired = desired
        self.client = client
        self.poke = poke
        self.stop_event = stop
        self.timeout_s = timeout_s
        self.since: int | None = None
        self.wakes = 0

    def run(self) -> None:
        backoff = 0.5
        throttled = 0  # 429s in a row
        while not self.stop_event.is_set():
            listening = [a for a in self.agents if a.registered and a.token and not a.partitioned
                         and not a.shutting_down]
            if not listening:
                self.stop_event.wait(0.5)
                continue
            by_name = {a.name: a for a in listening}
            held = self.since is not None  # a cursor makes the server hold the poll
            items: list[dict[str, Any]] = []
            sent: dict[str, int] = {}
            for a in listening:
                item: dict[str, Any] = {"name": a.name, "token": a.token}
                if self.desired:
                    # What the agent's next report would say (read across threads: a copy of
                    # the keys is atomic; `held_changes` tells later whether it still holds).
                    sent[a.name] = a.held_changes
                    item["running"] = sorted(list(a.members))
                    if a.known_version:
                        item["known"] = a.known_version
                items.append(item)
            try:
                reply = self.client.wait(items, self.since, self.timeout_s, desired=self.desired)
            except Throttled as error:
                # "Slow down": no wait is asked before the control plane's Retry-After is over
                # (until 6 Dec a 429 was backed off like any failure, from half a second).
                throttled += 1
                pause = THROTTLED.wait_s(error.retry_after_s, throttled)
                if error.status == 429:
                    log.info("wake-ups throttled; heartbeats go on", detail=error.detail, retry_in_s=round(pause, 1),
                             retry_after_s=error.retry_after_s, attempt=throttled)
                else:
                    # A 503 with Retry-After (Redis down, this web process holds all the waits it
                    # may): as long as it says at least, and backed off as any failure beyond.
                    log.debug("wake-ups unavailable; heartbeats go on", detail=error.detail, status=error.status,
                              retry_in_s=round(max(pause, backoff), 1), retry_after_s=error.retry_after_s)
                self.since = None
                self.stop_event.wait(max(pause, backoff))
                if error.status != 429:
                    backoff = min(backoff * 2, 30.0)
                continue
            except ProtocolError as error:
                # Unreachable, Redis down, or the web process holds all the waits it may: back
                # off (longer each time) and let the heartbeats carry the news meanwhile.
                log.debug("wake-ups unavailable; heartbeats go on", detail=str(error))
                self.since = None
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            throttled = 0
            if held:
                backoff = 0.5
            self.since = int(reply.get("seq") or 0)
            woken = [by_name[n] for n in reply.get("woken", []) if n in by_name and not by_name[n].partitioned]
            desired = reply.get("desired") or {}
            for agent in woken:
                if agent.name in desired and agent.name in sent:
                    agent.prefetched = (sent[agent.name], desired[agent.name])
                agent.wake_requested = True
            if woken:
                self.wakes += len(woken)
                log.debug("woken", nodes=[a.name for a in woken][:16], count=len(woken), seq=self.since)
                self.poke(woken)
                # Before asking again, let the rounds take what came and send what it caused
                # (starts, quick exits): the next wait then says what they run by then, and its
                # desired state is not dropped as older than the replies to those reports.
                deadline = time.monotonic() + 1.0
                while (any(a.prefetched is not None or a.busy for a in woken) and time.monotonic() < deadline
                       and not self.stop_event.is_set()):
                    self.stop_event.wait(0.02)
