"""What admission derives from a request's shape alone (GPUs, per node, types, memory, CPUs and
memory per GPU, topology, elastic range, roles): whether it is valid, the sizes it may run at,
its smallest gang, the GPU types it may use with their capable node classes, whether it can
never run on this fleet or has no ready node, and whether it needs whole nodes. Computed once
per distinct shape a cycle (``CycleContext.shapes``) and shared by every job asking for it;
requests that differ only in CPUs or memory per GPU share most of it."""

from __future__ import annotations

from typing import NamedTuple

from scheduler_core.admission import (
    TypeOption,
    capable_classes,
    elastic_note,
    invalid_request,
    never_runs,
    none_ready,
    type_options,
)
from scheduler_core.context import CycleContext
from scheduler_core.gang import (
    Demand,
    Member,
    demand_for,
    elastic_sizes,
    node_size_for,
    with_resources_per_gpu,
)
from scheduler_core.types import JobSpec


def fleet_node_size(ctx: CycleContext, spec: JobSpec) -> int:
    """The GPUs of the fleet's largest node (any state) of a type ``spec`` accepts: a job of at
    least that many GPUs without ``gpus_per_node`` takes whole nodes of it. A bind and an
    elastic job's growth both shape the gang by it (:func:`.gang.demand_for`)."""
    key = (spec.gpu_types, spec.min_gpu_memory_gb)
    found = ctx.node_sizes.get(key)
    if found is None:
        sizes: dict[str, int] = {}
        for nc in ctx.state.classes:
            sizes[nc.gpu_type.name] = max(sizes.get(nc.gpu_type.name, 0), nc.gpus)
        found = ctx.node_sizes[key] = node_size_for(spec, sizes, ctx.gpu_types)
    return found


def classes_for(ctx: CycleContext, demand: Demand,
                 option: TypeOption) -> tuple[tuple[int, ...], ...]:
    out = []
    for m in demand.members:
        cls = capable_classes(ctx, m)
        if option.gpu_type is not None:
            cls = tuple(c for c in cls if ctx.state.classes[c].gpu_type.name == option.gpu_type)
        out.append(cls)
    return tuple(out)


def _needs_whole(ctx: CycleContext, demand: Demand,
                 member_classes: tuple[tuple[int, ...], ...]) -> bool:
    return any(
        m.gpus >= ctx.state.classes[c].gpus
        for m, cls in zip(demand.members, member_classes, strict=True)
        for c in cls
    )


class JobShape(NamedTuple):
    """What admission derives from a request's shape alone, shared by identical requests. (A
    named tuple: hundreds are built per cycle, and a tuple is built in C.)"""

    invalid: str | None
    sizes: tuple[int, ...]
    node_size: int
    smallest: Demand
    options: tuple[TypeOption, ...]
    never: str | None
    not_ready: str | None
    needs_whole: bool
    key: tuple[object, ...]
    number: int
    """Sequence number of the shape in this cycle: a cheap dict key."""
    gang: int
    """Number of the shape's *gang*: what an untried job's outcome depends on besides its team
    (member GPUs, topology, the type options with their capable classes, whole-node need and
    the elastic note). Requests that differ only in CPUs or memory per GPU usually share it.
    -1 for shapes that are invalid, can never run or have no ready node."""


def shape_key(spec: JobSpec) -> tuple[object, ...]:
    return (spec.gpus, spec.gpus_per_node, spec.gpu_types, spec.min_gpu_memory_gb,
            spec.cpus_per_gpu, spec.memory_gb_per_gpu, spec.topology, spec.min_gpus,
            spec.max_gpus, spec.roles, spec.members_on_distinct_nodes)


def shape_of(ctx: CycleContext, spec: JobSpec) -> JobShape:
    key = shape_key(spec)
    found: JobShape | None = ctx.shapes.get(key)
    if found is not None:
        return found
    return new_shape(ctx, spec, key)


def new_shape(ctx: CycleContext, spec: JobSpec, key: tuple[object, ...]) -> JobShape:
    invalid = invalid_request(spec)
    if invalid is not None:
        shape = JobShape(invalid, (), 0, Demand.of((), spec.topology, spec.members_on_distinct_nodes),
                         (), None, None, False, key,
                         len(ctx.shapes), -1)
        ctx.shapes[key] = shape
        return shape
    # Without roles, CPUs and memory per GPU only scale the members: requests that differ in
    # nothing else share the node size, the sizes and the members' GPUs (the frame).
    frame_key = key[:4] + key[6:]
    frame = ctx.shape_frames.get(frame_key) if not spec.roles else None
    if frame is not None:
        node_size, sizes, like = frame
        smallest = with_resources_per_gpu(like, spec.cpus_per_gpu, spec.memory_gb_per_gpu)
    else:
        node_size = fleet_node_size(ctx, spec)
        sizes = elastic_sizes(spec)
        smallest = demand_for(spec, sizes[-1], node_size)
        if not spec.roles:
            ctx.shape_frames[frame_key] = (node_size, sizes, smallest)
    per_member: list[tuple[int, ...]] = []
    member: Member | None = None
    classes: tuple[int, ...] = ()
    for m in smallest.members:
        if m is not member:  # equal members of a gang are usually one object
            member, classes = m, capable_classes(ctx, m)
        per_member.append(classes)
    # Requests that differ only in CPUs or memory per GPU usually keep the same capable
    # classes; but whether the nodes can ever hold the gang (its members' CPUs and memory)
    # and which types can, differ: everything below is taken from the first request with
    # the same classes, CPUs and memory per GPU. (Until 5 Dec the CPUs and memory were left
    # out: a job of 2 members of 4 GPUs with no memory asked, behind one asking 64 GB per
    # GPU, was told the other's "Can never run on this fleet: ... 256 GB each ..." and never
    # started on an empty node that holds it.)
    facts_key = ((frame_key, tuple(per_member), _resources_bind(ctx, smallest, per_member))
                 if all(per_member) else None)
    facts = ctx.shape_facts.get(facts_key) if facts_key is not None else None
    if facts is not None:
        shape = JobShape(None, sizes, node_size, smallest, facts[0], facts[1], facts[2],
                         facts[3], key, len(ctx.shapes), facts[4])
        ctx.shapes[key] = shape
        return shape
    reason = _never(ctx, smallest, tuple(per_member))
    never = None if reason is None else f"Can never run on this fleet: it {reason}."
    options: tuple[TypeOption, ...] = ()
    if never is None:
        options = tuple(type_options(ctx, spec, smallest, per_member))
        if not options:
            never = ("Can never run on this fleet: no single GPU type can host every member "
                     "of its gang.")
        elif options[0].gpu_type is not None:
            # A gang does not mix device types: it must fit on the GPUs of one type.
            fitting = []
            first: str | None = None
            for option in options:
                why = _never(ctx, smallest, option.member_classes)
                if why is None:
                    fitting.append(option)
                elif first is None:
                    first = f"{why} of type {option.gpu_type}"
            options = tuple(fitting)
            if not options:
                never = (f"Can never run on this fleet: a gang does not mix GPU types, and on "
                         f"each type it {first}.")
    not_ready = none_ready(ctx, per_member) if never is None else None
    needs_whole = bool(options) and _needs_whole(ctx, smallest, options[0].member_classes)
    gang = -1
    if never is None and not_ready is None:
        gang_key = (tuple(m.gpus for m in smallest.members), smallest.topology, smallest.distinct_nodes,
                    tuple((o.gpu_type, o.member_classes) for o in options), needs_whole,
                    elastic_note(spec))
        gang = ctx.gangs.setdefault(gang_key, len(ctx.gangs))
    if facts_key is not None:
        ctx.shape_facts[facts_key] = (options, never, not_ready, needs_whole, gang)
    shape = JobShape(
        invalid=None,
        sizes=sizes,
        node_size=node_size,
        smallest=smallest,
        options=options,
        never=never,
        not_ready=not_ready,
        needs_whole=needs_whole,
        key=key,
        number=len(ctx.shapes),
        gang=gang,
    )
    ctx.shapes[key] = shape
    return shape


def _resources_bind(ctx: CycleContext, demand: Demand,
                    per_member: list[tuple[int, ...]]) -> tuple[tuple[int, int], ...] | None:
    """The members' CPUs and memory when they may limit how many of them a capable
    node holds (then the shape's facts are its own), ``None`` when every capable node holds
    as many of each member by its CPUs and memory as by its GPUs (then requests that differ
    only in them share the facts)."""
    classes = ctx.state.classes
    previous: Member | None = None
    for m, cls in zip(demand.members, per_member, strict=True):
        if m is previous:  # equal members of a gang are one object: asked once (16 of 128 GPUs)
            continue
        previous = m
        for c in cls:
            k = classes[c]
            if m.copies_per_node(k.gpus, k.cpus, k.memory_gb) < (k.gpus // m.gpus if m.gpus else 0):
                return tuple((x.cpus, x.memory_gb) for x in demand.members)
    return None


def _never(ctx: CycleContext, demand: Demand,
           per_member: tuple[tuple[int, ...], ...]) -> str | None:
    """:func:`~scheduler_core.admission.never_runs`, memoised per gang and classes."""
    if not all(per_member):
        # the sentence names the member nobody can host: not shared between gangs
        return never_runs(ctx, demand, list(per_member))
    # otherwise the answer depends on the members' GPUs, CPUs and memory, the topology,
    # whether they must be on distinct nodes and the classes
    key = (tuple([(m.gpus, m.cpus, m.memory_gb) for m in demand.members]), demand.topology,
           demand.distinct_nodes, per_member)
    memo = ctx.never_memo
    if key in memo:
        return memo[key]
    found = memo[key] = never_runs(ctx, demand, list(per_member))
    return found
