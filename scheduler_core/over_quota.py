"""A job its quota refuses, in words: why no quota could ever admit it (``never_under_quota``),
what would let it fit (``quota_remedy``: its team frees GPUs, its cohort lends more, or both)
and the ``QuotaExceeded`` outcome naming every GPU type it accepts with its numbers
(``quota_outcome``). The verdicts themselves are the ledger's (:mod:`scheduler_core.quota`)."""

from __future__ import annotations

from typing import NamedTuple

from scheduler_core.admission import TypeOption, elastic_note, quota_for
from scheduler_core.context import CycleContext
from scheduler_core.gang import Demand
from scheduler_core.outcome import Outcome
from scheduler_core.quota import QuotaVerdict, never_under_quota_words
from scheduler_core.sentences import counted
from scheduler_core.types import JobSpec, ReasonCode


def quota_never(ctx: CycleContext, team: str, option: TypeOption, gpus: int) -> bool:
    """Could this team never get ``gpus`` GPUs of the option's type? (Depends only on the
    quotas, not on usage, so it is memoised.)"""
    if option.gpu_type is None:
        return _mixed_never(ctx, team, option, gpus)
    if not ctx.ledger.governs(option.gpu_type):
        return False
    key = (team, option.gpu_type, gpus)
    found = ctx.quota_never.get(key)
    if found is None:
        found = ctx.ledger.check(team, option.gpu_type, gpus).never
        ctx.quota_never[key] = found
    return found


def _mixed_never(ctx: CycleContext, team: str, option: TypeOption, gpus: int) -> bool:
    """A heterogeneous gang's option mixing GPU types: never, when every type its members may
    use is governed and the most the team may ever hold of them all together (nominal plus
    its borrowing ceiling, per type) is less than ``gpus``, or when a member may only use types
    the team may never hold any of. Its quota is otherwise checked
    only on the GPUs placed; before, a gang of a team with no quota at all was told it would
    start, and held a reservation for ever."""
    classes = ctx.state.classes
    types = sorted({classes[c].gpu_type.name for cls in option.member_classes for c in cls})
    ceiling: dict[str, int] = {}
    for t in types:
        if not ctx.ledger.governs(t):
            return False
        v = ctx.ledger.check(team, t, gpus)
        ceiling[t] = v.nominal + v.ceiling_room
    if sum(ceiling.values()) < gpus:
        return True
    # a member whose every type the team may never hold any of
    return any(all(ceiling[classes[c].gpu_type.name] == 0 for c in cls)
               for cls in option.member_classes)


def never_under_quota(ctx: CycleContext, spec: JobSpec, options: tuple[TypeOption, ...],
                      gpus: int, largest: int = 0) -> str:
    """Why no quota could ever admit ``gpus`` GPUs: per GPU type, the most the team may ever
    hold (nominal, plus its borrowing limit or all its cohort could lend). Before, it gave
    today's use and what was left to borrow ("can borrow 0 more"), though the ceiling is what
    rules the job out."""
    clauses = []
    for o in options:
        if o.gpu_type is None:
            if len(options) == 1:  # its roles share no GPU type: only the sum over types
                types = sorted({ctx.state.classes[c].gpu_type.name
                                for cls in o.member_classes for c in cls})
                verdicts = [ctx.ledger.check(spec.team, t, gpus) for t in types]
                most = sum(v.nominal + v.ceiling_room for v in verdicts)
                clauses.append(f"at most {counted(most, 'GPU')} of {'/'.join(types)} together")
            continue  # with one-type options, the sum of the types they list
        clauses.append(quota_for(ctx, spec, o, gpus).ceiling_words(o.gpu_type))
    return never_under_quota_words(spec.team, clauses, gpus, _split_refused(largest))


def _split_refused(largest: int) -> str:
    """For a gang that may mix types whose ceilings together would hold it (``largest``: its
    largest member, 0 otherwise): that no split between the types fits them
    (admission.quota_split), so the sum is not the answer."""
    if largest <= 0:
        return ""
    return f", and mixing types, no split of its members (the largest of {counted(largest, 'GPU')}) fits each type's quota"


def _split_refused_now(largest: int) -> str:
    """For a gang that may mix types: that no split of its members fits what each type's
    quota admits now (``largest``: its largest member; 0: nothing to say)."""
    if largest <= 0:
        return ""
    return (f"; mixing types, no split of its members (the largest of "
            f"{counted(largest, 'GPU')}) fits what each type's quota admits now")


def quota_remedy(team: str, gpu_type: str, verdict: QuotaVerdict, gpus: int) -> str:
    """What would let ``gpus`` more GPUs fit the team's quota: the team freeing
    :meth:`QuotaVerdict.shortage` of its own GPUs, or the cohort lending that many more (up to
    the borrowing limit and what the others could ever lend), or, when neither alone can, both."""
    shortage = max(1, verdict.shortage(gpus))
    headroom = max(0, verdict.ceiling_room - verdict.room)
    ways = []
    if shortage <= verdict.used:
        ways.append(f"team {team} frees {counted(shortage, f'{gpu_type} GPU')}")
    if shortage <= headroom:
        ways.append(f"its cohort lends {shortage} more" if ways
                    else f"its cohort lends {counted(shortage, f'more {gpu_type} GPU')}")
    if ways:
        return " or ".join(ways)
    return (f"team {team} frees {counted(shortage - headroom, f'{gpu_type} GPU')} and its cohort lends "
            f"{headroom} more")


class OverQuota(NamedTuple):
    """A job its quota refuses on every GPU type it accepts, in words: ``lead`` ("" or " on
    both GPU types it accepts"), ``numbers`` (each type's use, nominal and borrowable, and the
    job's GPUs), ``remedy`` (:func:`quota_remedy` for ``option``, the type needing the fewest
    GPUs freed or lent) and that ``option``, the one its ETA and quota type concern;
    ``verdicts``: with several types, each option's verdict, for the caller's per-type
    remedies (asked once: the ledger's check is the costly part)."""

    lead: str
    numbers: str
    remedy: str
    option: TypeOption
    verdicts: tuple[tuple[TypeOption, QuotaVerdict], ...] = ()


def over_quota(ctx: CycleContext, spec: JobSpec, options: tuple[TypeOption, ...],
               gpus: int) -> OverQuota:
    """The words for ``gpus`` GPUs that no GPU type option's quota admits. One option: the
    ledger's sentence (:meth:`QuotaVerdict.describe`). Several: each type with its numbers,
    and the remedy of the type whose quota lacks the fewest GPUs (its
    :meth:`QuotaVerdict.shortage`; ties go to the job's preferred type, the options' order);
    a type its team can never get that many of is never the remedy while another can be.
    (Before, the sentence and the remedy named the first type only: a job accepting a100 or
    h100 was told about a100 alone, though it was over quota on both.)"""
    verdicts = [(o, quota_for(ctx, spec, o, gpus)) for o in options]
    if len(verdicts) == 1:
        o, v = verdicts[0]
        gpu_type = o.gpu_type or "any"
        return OverQuota("", v.describe(spec.team, gpu_type, gpus),
                         quota_remedy(spec.team, gpu_type, v, gpus), o)
    best, best_verdict = verdicts[0]
    for o, v in verdicts[1:]:
        if (v.never, v.shortage(gpus)) < (best_verdict.never, best_verdict.shortage(gpus)):
            best, best_verdict = o, v
    clauses = [f"{v.used} of {counted(v.nominal, f'nominal {o.gpu_type} GPU')} and can borrow "
               f"{v.borrowable} more{v.no_borrowing(o.gpu_type or 'any')}" for o, v in verdicts]
    listed = (f"{clauses[0]}, and {clauses[1]}" if len(clauses) == 2
              else f"{', '.join(clauses[:-1])}, and {clauses[-1]}")
    lead = (" on both GPU types it accepts" if len(clauses) == 2
            else f" on all {len(clauses)} GPU types it accepts")
    gpu_type = best.gpu_type or "any"
    return OverQuota(lead, f"team {spec.team} uses {listed}; this job needs {gpus}",
                     quota_remedy(spec.team, gpu_type, best_verdict, gpus), best, tuple(verdicts))


def quota_outcome(ctx: CycleContext, spec: JobSpec, options: tuple[TypeOption, ...],
                   refusal: tuple[TypeOption, QuotaVerdict, int] | None, demand: Demand,
                   needs_whole: bool, split_refused: int = 0) -> Outcome:
    """``QuotaExceeded`` for a job no GPU type option's quota admits at its smallest size
    (what must fit for it to start, and what its ETA counts). A heterogeneous gang, whose
    roles choose their types, is refused after placement: ``refusal`` says on which type.
    (Before, an elastic job was described at the first size refused, its largest, while its
    ETA counted its smallest.) ``split_refused``: the largest member of a gang whose
    mixed-type option no split fits its quotas now; its words list each type it accepts whole
    and say so."""
    typed = tuple(o for o in options if o.gpu_type is not None)
    if split_refused and typed:
        words = over_quota(ctx, spec, typed, demand.gpus)
    elif refusal is not None and any(o.gpu_type is None for o in options):
        option, verdict, gpus = refusal
        words = OverQuota("", verdict.describe(spec.team, option.gpu_type or "any", gpus),
                          quota_remedy(spec.team, option.gpu_type or "any", verdict, gpus), option)
    else:
        words = over_quota(ctx, spec, options, demand.gpus)
    return Outcome(
        ReasonCode.QUOTA_EXCEEDED,
        f"Over quota{words.lead}: {words.numbers}{_split_refused_now(split_refused)}"
        f"{elastic_note(spec)}.",
        True,
        words.remedy,
        demand=demand,
        classes=ctx.placer.union(words.option.member_classes),
        member_classes=words.option.member_classes,
        needs_whole_node=needs_whole,
        quota_type=words.option.gpu_type,
        # a lead comes only with several types' verdicts, each for demand.gpus; the remedy's
        # own type has its words already
        type_options=tuple(
            (o.gpu_type, ctx.placer.union(o.member_classes),
             words.remedy if o is words.option else quota_remedy(spec.team, o.gpu_type, v, demand.gpus))
            for o, v in words.verdicts if o.gpu_type is not None) if words.lead else (),
    )
