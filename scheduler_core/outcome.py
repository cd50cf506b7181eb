"""Why a pending job did not start this cycle: the record a deciding phase leaves for phase 7
(:mod:`scheduler_core.explain`), which words it, estimates its start and places it in line."""

from __future__ import annotations

from typing import NamedTuple

from scheduler_core.gang import Demand
from scheduler_core.types import ReasonCode


class Outcome(NamedTuple):
    """Why a pending job did not start this cycle, as decided by the phase that stopped it.
    (A named tuple: cheap to build; never compared or hashed, see ``explain``.)

    ``eta`` is set when the deciding phase knows the start (a reservation, a nomination);
    otherwise phase 7 estimates one from the release timeline for ``demand`` on
    ``classes``."""

    code: ReasonCode
    message: str
    resolvable: bool
    would_start_if: str
    eta: float | None = None
    demand: Demand | None = None
    classes: tuple[int, ...] = ()
    needs_whole_node: bool = False
    quota_type: str | None = None
    type_options: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    """For a job over its quota on several GPU types: each type it accepts with its node
    classes and its quota's remedy, in its order of preference. Phase 7 estimates each and
    keeps the earliest; ``quota_type`` is the type of the cheapest remedy (the fewest GPUs to
    free or lend), ``would_start_if`` that remedy. The earliest type's remedy leads the job's
    ``would_start_if`` when it is another type's."""
    type_classes: tuple[tuple[int, ...], ...] = ()
    """For a job that only maintenance keeps waiting and that accepts several GPU types: each
    type's capable classes (a gang runs on one type). Phase 7 looks on each for GPUs that free
    up clear of the windows and keeps the earliest; ``classes`` are the blocked type's."""
    lending_free_at: float | None = None
    """For a job that would borrow what its cohort lends, promised to jobs of other teams:
    when that lending is free again for it, every promised job held from now until it has
    run. Likewise for a job its team's quota admits alone but not beside what it promises to
    the team's jobs that start before it: when that quota has room for it again. A bound:
    phase 7 asks the promises for an earlier start from when its GPUs are there
    (``promised_gpus``)."""
    lending_words: str = ""
    """Why, as the clause after its estimated start."""
    promised_gpus: tuple[str, int] | None = None
    """The GPU type and count ``lending_free_at`` was measured for: phase 7 asks the promises
    whether the job may start earlier, from when its GPUs are there
    (``quota_promises.start_beside_promises``)."""
    promised_room: str = ""
    """What the promises hold (``its team's quota of a100 GPUs, promised to job big from
    t=7200 (16 GPUs),``), for a start they hold back to a time before ``lending_free_at``."""
    lending_would: str = ""
    """The condition ``would_start_if`` ends with for the promises (``, and job big has run
    ...``), dropped when they do not hold the job back."""
    elsewhere: tuple[Outcome, ...] = ()
    """For a job short of room that accepts several GPU types (a gang runs on one): why it
    found none on each other type its quota admits, in its order of preference (this outcome
    is its first admitted type's). The cycle tries every such type, so it starts on whichever
    has room first: phase 7 estimates each and tells the earliest. Until 7 Dec only the first
    type was estimated: an 8-GPU job taking a100 or h100, its a100 nodes busy until t=3000 and
    an h100 node free at t=1000, was told t=3000 and started at t=1000. For a job kept out by
    protected victims, a type whose search met a protection is told that protection
    (``cycle._protected_on_types``). After them, each type its quota refuses now but could
    admit, as the ``QuotaExceeded`` of a job of that type alone (``cycle._over_quota_types``)."""
    member_classes: tuple[tuple[int, ...], ...] = ()
    """For a gang: the node classes the cycle tried each member on (the option's, one per
    member), whose union is ``classes``. Narrower than each member's capable classes among
    ``classes`` when its team's quota split a mixed-type option, each member held to one type
    (``admission.quota_split``): phase 7 places a packed heterogeneous gang on these. Until
    7 Dec it placed each member on every class of ``classes`` it is capable of: members of 4
    GPUs taking a100 or h100, held to a100 and h100 by 4 GPUs of quota on each, were told
    t=1000, when an a100 node had room for both, and started at t=3000, when the h100 node
    freed. ``()``: each member on its capable classes among ``classes``."""
    note: str = ""
    """For an outcome of ``elsewhere``: a sentence phase 7 tells after the words naming the
    type it would start first on (the type's "Its team's lent quota is not reclaimed: …",
    ``cycle._add_reclaim_notes``)."""

    @property
    def reason(self) -> str:
        return str(self.code.value)
