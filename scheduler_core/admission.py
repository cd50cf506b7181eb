"""Phase 2 (admit under quota) and the capability half of phase 3.

Before any node is looked at, a job is checked in the order of seed 001's principle 15,
feasibility before fairness:

1. the request itself is valid;
2. every member of its gang is *capable* somewhere in the fleet (filter plugins' ``capable``,
   asked once per node class, not per node), the fleet holds enough capable GPUs in one
   topology domain, and the team's quota could ever cover it; otherwise it ``CanNeverRun``;
3. some capable node is ready (``NodeNotReady`` otherwise);
4. the GPU types it may use are ordered into *options* (one GPU type per option: a gang does
   not mix device types), and each option's quota verdict is taken from the ledger.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from scheduler_core.context import CycleContext
from scheduler_core.distinct_nodes import node_sets, shapes_of
from scheduler_core.gang import Demand, Member, is_elastic
from scheduler_core.quota import QuotaVerdict
from scheduler_core.sentences import counted, verb
from scheduler_core.state import FLEET, LEAF, SPINE
from scheduler_core.types import JobSpec, TopologyConstraint


@dataclass(frozen=True, slots=True)
class TypeOption:
    """One way to run a gang: on GPUs of ``gpu_type`` (``None``: a heterogeneous gang whose
    roles choose their own types), with the node classes each member may use."""

    gpu_type: str | None
    member_classes: tuple[tuple[int, ...], ...]


def invalid_request(spec: JobSpec) -> str | None:
    """A sentence naming the bad field of the request's shape, or ``None``. (The cycle checks
    ``runtime_limit_s`` and ``resize_cost_s`` itself: they are not part of the shape.)"""
    if spec.roles:
        for role in spec.roles:
            if role.count < 1 or role.gpus_per_member < 1:
                return (
                    f"role {role.name!r} asks for {counted(role.count, 'member')} of "
                    f"{counted(role.gpus_per_member, 'GPU')}; both must be at least 1"
                )
    elif spec.gpus < 1:
        return f"gpus must be at least 1, got {spec.gpus}"
    if spec.gpus_per_node is not None and spec.gpus_per_node < 1:
        return f"gpus_per_node must be at least 1 when given, got {spec.gpus_per_node}"
    if (spec.min_gpus is None) != (spec.max_gpus is None):
        return "min_gpus and max_gpus must be given together for an elastic job"
    if spec.min_gpus is not None and spec.max_gpus is not None:
        if not 1 <= spec.min_gpus <= spec.max_gpus:
            return f"elastic range must satisfy 1 <= min_gpus <= max_gpus, got {spec.min_gpus}..{spec.max_gpus}"
        if spec.roles:
            return "a heterogeneous gang (roles) cannot also be elastic (min_gpus/max_gpus)"
    if spec.cpus_per_gpu < 0 or spec.memory_gb_per_gpu < 0 or spec.min_gpu_memory_gb < 0:
        # (the fields by name only for a bad request: every shape of a cycle asks)
        for name in ("cpus_per_gpu", "memory_gb_per_gpu", "min_gpu_memory_gb"):
            if getattr(spec, name) < 0:
                return f"{name} must be >= 0, got {getattr(spec, name)}"
    if spec.array_task_limit is not None and spec.array_task_limit < 1:
        return f"array_task_limit must be at least 1 when given, got {spec.array_task_limit}"
    if spec.members_on_distinct_nodes and spec.topology is TopologyConstraint.SAME_NODE:
        # one node for all members and a node for each: neither placement could keep both
        return "topology same_node and members_on_distinct_nodes ask opposite things: give one of them"
    return None


def capable_classes(ctx: CycleContext, member: Member) -> tuple[int, ...]:
    """Node classes that could host ``member`` if empty (memoised per member shape)."""
    found = ctx.capable.get(member)
    if found is None:
        found = tuple(
            nc.id
            for nc in ctx.state.classes
            if all(f.capable(nc, member) is None for f in ctx.plugins.filters)
        )
        ctx.capable[member] = found
    return found


def _incapable_reason(ctx: CycleContext, member: Member) -> str:
    """Why no node class can host ``member``: the first filter verdict, with numbers."""
    classes = ctx.state.classes
    type_ok = [nc for nc in classes if member.accepts_type(nc.gpu_type)]
    if not type_ok:
        have = ", ".join(
            sorted({f"{nc.gpu_type.name} ({nc.gpu_type.memory_gb} GB)" for nc in classes})
        ) or "no GPUs"
        wants = []
        if member.gpu_types:
            wants.append("type " + " or ".join(member.gpu_types))
        if member.min_gpu_memory_gb:
            wants.append(f"at least {member.min_gpu_memory_gb} GB per GPU")
        return f"needs GPUs of {' with '.join(wants)}; the fleet has {have}"
    widest = max(nc.gpus for nc in type_ok)
    if widest < member.gpus:
        return (
            f"needs {counted(member.gpus, 'GPU')} on one node; the largest capable node has {widest}"
        )
    cpus = max(nc.cpus for nc in type_ok if nc.gpus >= member.gpus)
    if cpus < member.cpus:
        return f"needs {counted(member.cpus, 'CPU')} on one node; capable nodes have at most {cpus}"
    mem = max(nc.memory_gb for nc in type_ok if nc.gpus >= member.gpus)
    return f"needs {member.memory_gb} GB of memory on one node; capable nodes have at most {mem}"


def never_runs(ctx: CycleContext, demand: Demand, per_member: list[tuple[int, ...]]) -> str | None:
    """Why this gang can never run on this fleet as it is built, or ``None``."""
    for member, cls in zip(demand.members, per_member, strict=True):
        if not cls:
            return _incapable_reason(ctx, member)
    union = sorted({c for cls in per_member for c in cls})
    if demand.topology is TopologyConstraint.SAME_NODE and len(demand.members) > 1:
        common = set(per_member[0]).intersection(*per_member[1:])
        widest = max((ctx.state.classes[c].gpus for c in common), default=0)
        if widest < demand.gpus:
            return (f"needs {counted(demand.gpus, 'GPU')} on one node for all its members; the largest "
                    f"node every member accepts has {widest}")
    total = sum(ctx.state.classes[c].gpus * _class_nodes(ctx, c) for c in union)
    if total < demand.gpus:
        return f"needs {counted(demand.gpus, 'capable GPU')}; the whole fleet has {total}"
    if demand.distinct_nodes and len(demand.members) > 1:
        nodes = sum(_class_nodes(ctx, c) for c in union)
        if nodes < len(demand.members):
            return (f"needs {distinct_nodes_words(demand)}; the fleet has "
                    f"{counted(nodes, 'capable node')}")
    short = _members_without_room(ctx, demand, per_member)
    if short is not None:
        return short
    if demand.distinct_nodes and len(demand.members) > 1:
        short = _distinct_set_without_nodes(ctx, demand, per_member)
        if short is not None:
            return short
    level = {TopologyConstraint.SAME_LEAF: LEAF, TopologyConstraint.SAME_SPINE: SPINE}.get(
        demand.topology
    )
    if level is not None and len(demand.members) > 1:
        best = _largest_domain(ctx, level, union)
        where = "leaf switch" if level == LEAF else "spine"
        if best < demand.gpus:
            return (
                f"needs {counted(demand.gpus, 'GPU')} under one {where}; the largest {where} has "
                f"{counted(best, 'capable GPU')}"
            )
    return None


def _members_without_room(ctx: CycleContext, demand: Demand,
                          per_member: list[tuple[int, ...]]) -> str | None:
    """Members of one shape that the fleet's capable nodes cannot all hold at once, by CPUs
    and memory as well as GPUs (4 members of 2 GPUs and 32 CPUs each where only 3 fit): the
    check a submit makes (``capability.never_runs``). Without it such a gang was told it
    waits for contiguous GPUs, as if it could ever start."""
    copies: dict[Member, int] = {}
    classes: dict[Member, tuple[int, ...]] = {}
    for member, cls in zip(demand.members, per_member, strict=True):
        copies[member] = copies.get(member, 0) + 1
        classes[member] = cls
    for member, count in copies.items():
        if count == 1:
            continue
        # a gang on distinct nodes puts one member on a node however many it would hold
        most = 1 if demand.distinct_nodes else count
        room = sum(min(most, member.copies_per_node(k.gpus, k.cpus, k.memory_gb))
                   * _class_nodes(ctx, c) for c in classes[member] for k in (ctx.state.classes[c],))
        if count > room and demand.distinct_nodes:
            return (f"needs {counted(count, 'distinct node')} with room for a member of "
                    f"{counted(member.gpus, 'GPU')} each; the fleet has {counted(room, 'such node')}")
        if count > room:
            each = ", ".join(part for part in (
                counted(member.gpus, "GPU"), f"{member.cpus} CPUs" if member.cpus else "",
                f"{member.memory_gb} GB" if member.memory_gb else "") if part)
            return f"needs {count} members of {each} each at once; the capable nodes have room for {room}"
    return None


def _distinct_set_without_nodes(ctx: CycleContext, demand: Demand,
                                per_member: list[tuple[int, ...]]) -> str | None:
    """A set of a gang on distinct nodes (:func:`~scheduler_core.distinct_nodes.node_sets`)
    whose members outnumber the fleet's nodes with room for one of them (a member's capable
    classes have room for it when empty), or ``None``. Until 7 Dec only the gang's members
    of one shape and all its members were counted: two members of roles that take only h100
    GPUs, of 1 and 2 GPUs, on a fleet of one h100 node and many others, waited for ever."""
    for need in node_sets(shapes_of(demand, per_member)):
        nodes = sum(_class_nodes(ctx, c) for c in need.where)
        if nodes < need.members:
            kind = "/".join(sorted({ctx.state.classes[c].gpu_type.name for c in need.where}))
            return (f"needs {distinct_nodes_words(demand)}; {need.members} of its members have "
                    f"room on only {counted(nodes, 'node')} ({kind})")
    return None


def distinct_nodes_words(demand: Demand, free: str = "") -> str:
    """"3 distinct nodes with 4 GPUs each" for a gang on distinct nodes, its smaller members
    named: "... each (one with 2)", "... each (3 with 2)", "... each (one with 3, 2 with 2)"."""
    smaller: dict[int, int] = {}
    for m in demand.members:
        if m.gpus != demand.largest_member:
            smaller[m.gpus] = smaller.get(m.gpus, 0) + 1
    rest = ", ".join(f"{'one' if count == 1 else count} with {size}" for size, count in smaller.items())
    rest = f" ({rest})" if rest else ""
    return (f"{counted(len(demand.members), 'distinct node')} with "
            f"{counted(demand.largest_member, free + 'GPU')} each{rest}")


def _class_nodes(ctx: CycleContext, c: int) -> int:
    return ctx.state.class_node_count[c]


def _largest_domain(ctx: CycleContext, level: int, classes: list[int]) -> int:
    """The most GPUs of ``classes`` one domain of ``level`` holds (every node, any state). The
    fleet's capacity does not change in a cycle and same-leaf gangs of many shapes ask it of
    the same few class sets: summed once per (level, classes)."""
    key = (level, tuple(classes))
    found = ctx.largest_domains.get(key)
    if found is None:
        totals: dict[int, int] = {}
        for c in classes:
            for domain, count in ctx.state.capacity_by_domain(level, c).items():
                totals[domain] = totals.get(domain, 0) + count
        found = ctx.largest_domains[key] = max(totals.values(), default=0)
    return found


def none_ready(ctx: CycleContext, per_member: list[tuple[int, ...]]) -> str | None:
    """A sentence if no ready node could host some member, else ``None``."""
    for cls in per_member:
        if all((FLEET, 0, c) not in ctx.state.free_sum for c in cls):
            down = sum(_class_nodes(ctx, c) for c in cls)
            which = "the only node" if down == 1 else f"all {down} nodes"
            return f"{which} that could host it {verb(down, 'is', 'are')} not ready ({_not_ready_states(ctx, cls)})"
    return None


def _not_ready_states(ctx: CycleContext, classes: tuple[int, ...]) -> str:
    """The states of the nodes of these classes, none of them ready: "quarantined" for one
    node, "1 down, 2 quarantined" for several."""
    wanted = set(classes)
    states: dict[str, int] = {}
    node_class = ctx.state.node_class
    for n, node in enumerate(ctx.state.nodes):
        if node_class[n] in wanted:
            states[node.state.value] = states.get(node.state.value, 0) + 1
    if sum(states.values()) == 1:
        return next(iter(states))
    return ", ".join(f"{count} {state}" for state, count in sorted(states.items()))


def device_order(ctx: CycleContext, gpu_type: str) -> tuple[int, float, str]:
    """The smallest sufficient device first: less memory, then less throughput, so that large
    devices stay free for the jobs that need them."""
    info = ctx.gpu_types.get(gpu_type)
    return (info.memory_gb if info else 0, info.throughput if info else 0.0, gpu_type)


def type_options(ctx: CycleContext, spec: JobSpec, demand: Demand,
                 per_member: list[tuple[int, ...]]) -> list[TypeOption]:
    """GPU types to try, in preference order: the job's own order of ``gpu_types`` if given,
    else the smallest sufficient device first (less memory, then less throughput) so that
    large devices stay free for jobs that need them."""
    classes = ctx.state.classes
    distinct = set(per_member)
    usable = sorted(set.intersection(*({classes[c].gpu_type.name for c in cls}
                                       for cls in distinct)))
    if spec.roles:
        # A heterogeneous gang may mix device types (its roles may ask for different ones),
        # but its quota is per type: it tries each type every role accepts first, quota
        # checked before placement as for any gang, and mixing types last. With mixing only,
        # the placer's choice decided the type and a quota refusal of it ended the search: a
        # team with h100 quota and none on a100 never started its gang on an empty fleet.
        mixed = TypeOption(None, tuple(per_member))
        typed = type_options(ctx, dataclasses.replace(spec, roles=()), demand, per_member) \
            if usable else []
        if len({classes[c].gpu_type.name for cls in distinct for c in cls}) <= 1:
            return typed or [mixed]
        return [*typed, mixed]
    if spec.gpu_types:
        rank = {t: i for i, t in enumerate(spec.gpu_types)}
        usable.sort(key=lambda t: (rank.get(t, len(rank)), t))
    else:
        usable.sort(key=lambda t: device_order(ctx, t))
    return [
        TypeOption(t, tuple(tuple(c for c in cls if classes[c].gpu_type.name == t)
                            for cls in per_member))
        for t in usable
    ]


def option_types(ctx: CycleContext, option: TypeOption) -> list[str]:
    """The GPU types of an option's node classes, in name order."""
    classes = ctx.state.classes
    return sorted({classes[c].gpu_type.name for cls in option.member_classes for c in cls})


def explained_option(admitted: list[TypeOption]) -> TypeOption:
    """Of the options the quota admits (in the order tried), the one a gang that found no
    room is explained and given its ETA on: the first, except for a heterogeneous gang whose
    mixed-type option offers each member every node class its one-type options do. That
    option starts no later than any of them (whatever they place, it may), so its start is
    the gang's. Until 7 Dec such a gang was told the start of its first one-type option: with
    learner and worker each taking a100 or h100, an a100 node free now and an h100 node free
    at t=1000, it was told "Needs 16 a100 GPUs", start t=3000, when a second a100 node frees,
    and started at t=1000 on both types."""
    first = admitted[0]
    if len(admitted) == 1:
        return first
    mixed = next((o for o in admitted if o.gpu_type is None), None)
    if mixed is None:
        return first
    widest = [frozenset(cls) for cls in mixed.member_classes]
    if all(all(w.issuperset(cls) for w, cls in zip(widest, o.member_classes, strict=True))
           for o in admitted if o is not mixed):
        return mixed
    return first


# What a GPU type no quota governs holds, for :func:`quota_split`; asked for this many GPUs,
# the ledger also answers with the whole verdict (room and ceiling), which it skips for a
# request that fits within nominal.
UNLIMITED = 1 << 40


def quota_split(ctx: CycleContext, spec: JobSpec, option: TypeOption, demand: Demand, *,
                ever: bool = False) -> TypeOption | None:
    """A heterogeneous gang's option mixing GPU types, its members each held to one type so
    that what it places of each type stays within what the team's quota admits now (a type
    no quota governs holds any number). ``option`` itself when every type's quota admits the
    whole gang now (any mix is then within it; or no type is governed): the placer may then
    mix freely. ``None`` when no split fits the quotas now: the option waits for its quota,
    as a one-type option its quota refuses does. With ``ever``, the same against the most
    each quota could ever admit (``None``: the option can never run).

    Before 5 Dec the placer mixed freely and the quota judged its choice after: a team with 4
    GPUs of quota on each of two types never started its 7-GPU gang on an empty fleet (told
    "spread too thinly"), and with one type busy was promised all 7 on it, a reservation its
    quota would refuse when it came. Until a second fix on 5 Dec the split was by what the
    quotas could ever admit when no split fit them now, and a team whose quotas could hold
    the gang but not beside its running jobs mixed freely: with 6 of 8 GPUs in use on each of two types, its
    7-GPU gang was told "spread too thinly" on a free fleet, and reserved 7 GPUs of one type
    on a busy one, where its quota has room for 2 as long as its jobs run; and a gang of which
    one type was governed and another not mixed freely, its parameter server, which only
    the governed type (h100) could run, reserved on h100 GPUs its team had no quota for."""
    types = option_types(ctx, option)
    governed = [t for t in types if ctx.ledger.governs(t)]
    if option.gpu_type is not None or not governed:
        return option
    # a type no quota governs holds any number
    caps = dict.fromkeys(types, UNLIMITED)
    for t in governed:
        v = ctx.ledger.check(spec.team, t, UNLIMITED)
        caps[t] = v.nominal + v.ceiling_room if ever else max(0, v.nominal + v.room - v.used)
    if all(caps[t] >= demand.gpus for t in types):
        return option
    return _split(ctx, option, demand, caps)


def split_refusal(ctx: CycleContext, spec: JobSpec, option: TypeOption, demand: Demand
                  ) -> tuple[TypeOption, QuotaVerdict, int]:
    """For a mixed option no split of which fits the quotas now (:func:`quota_split`): the
    refusal its ``QuotaExceeded`` words and ETA follow, the type of the option refusing the
    whole gang with the fewest GPUs short (the first in name order on a tie)."""
    types = option_types(ctx, option)
    verdicts = [(ctx.ledger.check(spec.team, t, demand.gpus), t) for t in types]
    verdict, gpu_type = min(verdicts, key=lambda vt: (vt[0].admitted, vt[0].never,
                                                      vt[0].shortage(demand.gpus), vt[1]))
    return TypeOption(gpu_type, option.member_classes), verdict, demand.gpus


def _split(ctx: CycleContext, option: TypeOption, demand: Demand, caps: dict[str, int]) -> TypeOption | None:
    """Each member, largest first, on the first GPU type in :func:`device_order` that it
    accepts and whose cap it still fits."""
    classes = ctx.state.classes
    left = dict(caps)
    restricted: list[tuple[int, ...]] = []
    for member, cls in zip(demand.members, option.member_classes, strict=True):
        accepted = sorted({classes[c].gpu_type.name for c in cls}, key=lambda t: device_order(ctx, t))
        chosen = next((t for t in accepted if left[t] >= member.gpus), None)
        if chosen is None:
            return None
        left[chosen] -= member.gpus
        restricted.append(tuple(c for c in cls if classes[c].gpu_type.name == chosen))
    return TypeOption(None, tuple(restricted))


def quota_for(ctx: CycleContext, spec: JobSpec, option: TypeOption, gpus: int) -> QuotaVerdict:
    """The ledger's verdict for ``gpus`` more GPUs of the option's type. Heterogeneous gangs
    are checked per type after placement (:func:`quota_for_grants`)."""
    if option.gpu_type is None:
        return QuotaVerdict(admitted=True, borrowed=False, governed=False)
    return ctx.ledger.check(spec.team, option.gpu_type, gpus)


def gpus_by_type(ctx: CycleContext, nodes_gpus: list[tuple[int, int]]) -> dict[str, int]:
    """GPUs per GPU type for (node, gpus) pairs, keys sorted."""
    out: dict[str, int] = {}
    for node, gpus in nodes_gpus:
        t = ctx.state.nodes[node].gpu_type
        out[t] = out.get(t, 0) + gpus
    return dict(sorted(out.items()))


def quota_for_grants(ctx: CycleContext, spec: JobSpec,
                     by_type: dict[str, int]) -> tuple[bool, bool, str | None]:
    """(admitted, borrowed, first refusing type) for a placement spanning several types."""
    borrowed = False
    for t, n in by_type.items():
        verdict = ctx.ledger.check(spec.team, t, n)
        if not verdict.admitted:
            return False, False, t
        borrowed = borrowed or verdict.borrowed
    return True, borrowed, None


def elastic_note(spec: JobSpec) -> str:
    if is_elastic(spec):
        return f" (elastic {spec.min_gpus}..{spec.max_gpus} GPUs)"
    return ""
