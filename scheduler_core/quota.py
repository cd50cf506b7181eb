"""Phase 2: admission under quota, per team × GPU type, with cohort borrowing.

Rules (seed 000 "Quotas, borrowing, and fairness", seed 004 §3, Kueue's ClusterQueue/cohort):

* Quota is enforced for a GPU type as soon as any team has a quota for it; a team without an
  entry for an enforced type has a nominal quota of 0 and no cohort. Types nobody has a quota
  for are not governed.
* A team may always use up to its nominal quota.
* Beyond it, a team in a cohort borrows: its excess over nominal may not pass its
  ``borrowing_limit``, and the cohort's total excess may not pass what the other members lend:
  for each member, its unused nominal GPUs capped by its ``lending_limit``.
* A job admitted with any excess over nominal is *borrowed*: an owner reclaiming its quota may
  preempt it first (see :mod:`scheduler_core.preemption`).

The ledger keeps per (cohort, type) sums of lendable and borrowed GPUs so a check is O(1).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from scheduler_core.sentences import counted
from scheduler_core.types import QuotaInfo


class QuotaVerdict(NamedTuple):
    """The answer to "may ``team`` take ``gpus`` more GPUs of ``gpu_type``?". (A named tuple:
    the cycle asks hundreds of times and a tuple is built in C.)"""

    admitted: bool
    borrowed: bool
    governed: bool
    used: int = 0
    nominal: int = 0
    borrowable: int = 0
    """How many GPUs beyond nominal the team could still take (borrowing limit and cohort);
    only computed when the request does not fit within nominal (0 otherwise)."""
    never: bool = False
    """The request exceeds what the team could ever get (nominal + borrowing limit, or what the
    whole cohort owns)."""
    room: int = 0
    """How many GPUs beyond nominal the team may hold in all now, its own borrowed GPUs
    included (``borrowable`` is what is left of it)."""
    ceiling_room: int = 0
    """The most ``room`` could ever be: the borrowing limit, or all the others could lend."""
    cohort: str | None = None
    """The team's cohort on this GPU type (``None``: it borrows from no one)."""
    borrowing_limit: int | None = None

    def shortage(self, gpus: int) -> int:
        """How many of its GPUs of this type the team must free before ``gpus`` more fit its
        quota as the cohort lends now. Freeing borrowed GPUs gives back borrowing room, so this
        is measured against nominal plus the whole room, not plus what is left of it."""
        return self.used + gpus - self.nominal - self.room

    def ceiling_words(self, gpu_type: str) -> str:
        """The most the team may ever hold of ``gpu_type``, in words: "at most 72 H100-80GB GPUs
        (40 nominal and 32 borrowed at most)". The cycle's ``CanNeverRun`` over quota and the
        submit form's check (:func:`scheduler_core.capability.never_under_quota`) say it alike."""
        return (f"at most {counted(self.nominal + self.ceiling_room, f'{gpu_type} GPU')} ({self.nominal} nominal"
                + (f" and {self.ceiling_room} borrowed at most)" if self.ceiling_room else ", none to borrow)"))

    def describe(self, team: str, gpu_type: str, gpus: int) -> str:
        return (
            f"team {team} uses {self.used} of {self.nominal} nominal {gpu_type} "
            f"{'GPU' if self.nominal == 1 else 'GPUs'} and can "
            f"borrow {self.borrowable} more{self.no_borrowing(gpu_type)}; this job needs {gpus}"
        )

    def no_borrowing(self, gpu_type: str) -> str:
        """Why a team in a cohort can borrow nothing more: its borrowing limit, or a cohort with
        nothing unused to lend now (``qm quotas`` shows the borrowing room the limit leaves,
        which the cohort may not fill); for a team in no cohort on this type, that it has none to
        borrow from (it read "can borrow 0 more" with no reason, where an admin may have set a
        borrowing limit that never applies)."""
        if self.borrowable > 0:
            return ""
        if self.cohort is None:
            return " (no cohort to borrow from)"
        if self.borrowing_limit is not None and self.room >= self.borrowing_limit:
            beyond = self.used - self.nominal - self.borrowing_limit
            if beyond > 0:  # a quota or limit lowered under what the team runs
                return (f" (it borrows {self.used - self.nominal}, {beyond} beyond its borrowing limit of "
                        f"{self.borrowing_limit})")
            return f" (its borrowing limit of {self.borrowing_limit} is used)"
        return f" (cohort {self.cohort} has no unused {gpu_type} GPUs to lend now)"


def never_under_quota_words(team: str, clauses: list[str], gpus: int, tail: str = "") -> str:
    """The ``CanNeverRun`` sentence over quota, from each GPU type's ceiling in words
    (:meth:`QuotaVerdict.ceiling_words`): the cycle's, and the submit form's check's before the
    job is stored (:func:`scheduler_core.capability.never_under_quota`)."""
    listed = clauses[0] if len(clauses) == 1 else f"{', '.join(clauses[:-1])} or {clauses[-1]}"
    return f"Can never run under its quota: team {team} may hold {listed}; this job needs {gpus}{tail}."


def _lendable(q: QuotaInfo, used: int) -> int:
    unused = max(0, q.nominal_gpus - used)
    return unused if q.lending_limit is None else min(unused, q.lending_limit)


def _excess(q: QuotaInfo, used: int) -> int:
    return max(0, used - q.nominal_gpus)


class QuotaLedger:
    """Usage per team × GPU type, with the cohort sums needed for O(1) checks."""

    def __init__(self, quotas: Iterable[QuotaInfo]) -> None:
        self.quota: dict[tuple[str, str], QuotaInfo] = {}
        for q in sorted(quotas, key=lambda q: (q.team, q.gpu_type)):
            self.quota[(q.team, q.gpu_type)] = q
        self.governed_types = frozenset(t for _, t in self.quota)
        self._members: dict[tuple[str, str], tuple[QuotaInfo, ...]] = {}
        self.used: dict[tuple[str, str], int] = {}
        self.cohort_lendable: dict[tuple[str, str], int] = {}
        self.cohort_borrowed: dict[tuple[str, str], int] = {}
        self.cohort_max_lendable: dict[tuple[str, str], int] = {}
        for (_team, gpu_type), q in self.quota.items():
            if q.cohort is None:
                continue
            key = (q.cohort, gpu_type)
            self.cohort_lendable[key] = self.cohort_lendable.get(key, 0) + _lendable(q, 0)
            self.cohort_borrowed.setdefault(key, 0)
            self.cohort_max_lendable[key] = self.cohort_max_lendable.get(key, 0) + _lendable(q, 0)

    def governs(self, gpu_type: str) -> bool:
        return gpu_type in self.governed_types

    def cohort_of(self, team: str, gpu_type: str) -> str | None:
        """The cohort ``team`` borrows from on ``gpu_type`` (``None``: it cannot borrow)."""
        q = self.quota.get((team, gpu_type))
        return q.cohort if q is not None else None

    def cohort_members(self, cohort: str, gpu_type: str) -> tuple[QuotaInfo, ...]:
        """The quotas of ``cohort`` on ``gpu_type``, by team (for ETA what-ifs)."""
        key = (cohort, gpu_type)
        found = self._members.get(key)
        if found is None:
            found = self._members[key] = tuple(
                q for (_, t), q in self.quota.items() if t == gpu_type and q.cohort == cohort)
        return found

    def admits_with(self, uses: dict[str, int], team: str, gpu_type: str, gpus: int) -> bool:
        """Would :meth:`check` admit ``gpus`` more for ``team`` if each team of its cohort
        used ``uses[team]`` GPUs of ``gpu_type`` (teams not given: what they use now)? For ETA
        what-ifs: the same rules as :meth:`check`, without building a ledger."""
        q = self.quota.get((team, gpu_type))
        if gpu_type not in self.governed_types:
            return True
        used = uses.get(team, self.used_by(team, gpu_type))
        nominal = q.nominal_gpus if q is not None else 0
        after = used + gpus
        if q is not None and after <= nominal:
            return True
        if q is None or q.cohort is None:
            return after <= nominal
        room = max(0, self.cohort_room_with(uses, q))
        if q.borrowing_limit is not None:
            room = min(room, q.borrowing_limit)
        return max(0, after - nominal) <= room

    def cohort_room_with(self, uses: dict[str, int], q: QuotaInfo) -> int:
        """What the other members of ``q``'s cohort would leave ``q.team`` to borrow of
        ``q.gpu_type`` if each used ``uses[team]`` GPUs (teams not given: what they use now):
        their lendable GPUs less the other borrowers' excess, before ``q``'s borrowing limit.
        Negative when the others borrow more than the rest lend."""
        assert q.cohort is not None
        lendable = borrowed = 0
        for other in self.cohort_members(q.cohort, q.gpu_type):
            if other.team == q.team:
                continue
            other_used = uses.get(other.team, self.used_by(other.team, q.gpu_type))
            lendable += _lendable(other, other_used)
            borrowed += _excess(other, other_used)
        return lendable - borrowed

    def room_taken_by(self, team: str, gpu_type: str, used: int, gpus: int) -> tuple[int, int]:
        """What ``gpus`` more of ``gpu_type`` for ``team``, from ``used``, take from what its
        cohort lends the others: (the excess over its nominal they add, the unused nominal
        they no longer lend). (0, 0) for a team in no cohort on that type."""
        q = self.quota.get((team, gpu_type))
        if q is None or q.cohort is None:
            return 0, 0
        return (_excess(q, used + gpus) - _excess(q, used),
                _lendable(q, used) - _lendable(q, used + gpus))

    def used_by(self, team: str, gpu_type: str) -> int:
        return self.used.get((team, gpu_type), 0)

    def overdrawn(self, team: str, gpu_type: str) -> bool:
        """Does ``team``'s side hold more ``gpu_type`` GPUs above nominal than it lends itself:
        its cohort (its borrowers' excess beyond its lenders' unused quota), or the team alone
        when it is in no cohort (anything above its nominal), or a team with no quota at all on
        a governed type (anything it holds)? That excess is capacity
        guaranteed to teams outside it: a team moved out of the cohort it borrowed from, or
        whose quota was lowered, holds it until reclaimed (seed 004: borrowers first)."""
        q = self.quota.get((team, gpu_type))
        if q is None:
            # No quota on a type quotas govern (deleted under running work): all it holds is
            # someone else's guarantee.
            return gpu_type in self.governed_types and self.used_by(team, gpu_type) > 0
        if q.cohort is None:
            return self.used_by(team, gpu_type) > q.nominal_gpus
        key = (q.cohort, gpu_type)
        return self.cohort_borrowed[key] > self.cohort_lendable[key]

    def charge(self, team: str, gpu_type: str, gpus: int) -> None:
        """Record ``gpus`` more (or, negative, fewer) GPUs in use by ``team``."""
        key = (team, gpu_type)
        before = self.used.get(key, 0)
        after = before + gpus
        self.used[key] = after
        q = self.quota.get(key)
        if q is None or q.cohort is None:
            return
        ckey = (q.cohort, gpu_type)
        self.cohort_lendable[ckey] += _lendable(q, after) - _lendable(q, before)
        self.cohort_borrowed[ckey] += _excess(q, after) - _excess(q, before)

    def _ceiling_room(self, q: QuotaInfo) -> int:
        """The most GPUs beyond nominal a team in a cohort could ever borrow: its borrowing
        limit, or all the others could lend."""
        assert q.cohort is not None
        room = self.cohort_max_lendable[(q.cohort, q.gpu_type)] - _lendable(q, 0)
        return room if q.borrowing_limit is None else min(room, q.borrowing_limit)

    def most_held(self, team: str, gpu_type: str) -> int:
        """The most GPUs of a governed ``gpu_type`` the team may ever hold at once: its nominal
        quota and the most it could borrow (the figure of ``QuotaVerdict.ceiling_words``)."""
        q = self.quota.get((team, gpu_type))
        if q is None:
            return 0
        return q.nominal_gpus + (self._ceiling_room(q) if q.cohort is not None else 0)

    def check(self, team: str, gpu_type: str, gpus: int) -> QuotaVerdict:
        if gpu_type not in self.governed_types:
            return QuotaVerdict(admitted=True, borrowed=False, governed=False)
        key = (team, gpu_type)
        used = self.used.get(key, 0)
        q = self.quota.get(key)
        nominal = q.nominal_gpus if q is not None else 0
        after = used + gpus
        if q is not None and after <= nominal:
            return QuotaVerdict(admitted=True, borrowed=False, governed=True, used=used,
                                nominal=nominal, borrowable=0, never=False)
        if q is None or q.cohort is None:
            return QuotaVerdict(
                admitted=after <= nominal, borrowed=False, governed=True, used=used,
                nominal=nominal, borrowable=0, never=gpus > nominal,
            )
        ckey = (q.cohort, gpu_type)
        excess = _excess(q, used)
        # How much excess over nominal the cohort lets this team hold: the others' lendable
        # GPUs minus what the other borrowers already hold.
        others_lendable = self.cohort_lendable[ckey] - _lendable(q, used)
        others_borrowed = self.cohort_borrowed[ckey] - excess
        room = max(0, others_lendable - others_borrowed)
        if q.borrowing_limit is not None:
            room = min(room, q.borrowing_limit)
        excess_after = max(0, after - nominal)
        admitted = after <= nominal or excess_after <= room
        ceiling_room = self._ceiling_room(q)
        return QuotaVerdict(
            admitted=admitted,
            borrowed=admitted and excess_after > 0,
            governed=True,
            used=used,
            nominal=nominal,
            borrowable=max(0, room - excess),
            never=gpus > nominal + ceiling_room,
            room=room,
            ceiling_room=ceiling_room,
            cohort=q.cohort,
            borrowing_limit=q.borrowing_limit,
        )
