"""The working cluster state of one cycle, with free-capacity indexes.

The cycle never scans every node for a job. Ready nodes are grouped into *classes* (same GPU
type, GPU count, CPUs and memory), and for every class the state keeps buckets of nodes by
free GPU count at three levels: the whole fleet, each spine and each leaf switch. Free GPU sums
are kept per bucket key too, so "does this leaf have 32 capable GPUs free?" is one dict lookup
and "the fullest node with at least 2 free" walks buckets 2, 3, ... until one is non-empty.

What-ifs are reversible instead of copied: :meth:`ClusterState.simulate_removal` frees a
holder's GPUs and returns a function that takes them back (Kueue's
``Snapshot.SimulateWorkloadRemoval``). Preemption search and reservation planning run many
what-ifs per cycle on one state object.

Dicts are used as insertion-ordered sets; every structure is filled in node-name order, so the
iteration order is a pure function of the snapshot and of the operations applied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import NamedTuple

from scheduler_core.errors import SnapshotError
from scheduler_core.gang import Member
from scheduler_core.types import GpuPlacement, GpuTypeInfo, NodeInfo, NodeState, gpu_placement

FLEET = 0
SPINE = 1
LEAF = 2

JOB = "job"
HOLD = "hold"
Holder = tuple[str, str]
"""Who holds GPUs: (``JOB``, job id) for running or newly bound jobs, (``HOLD``, job id) for
GPUs promised to a job that will start later (a reservation or a nomination after
preemption)."""

IndexKey = tuple[int, int, int]
"""(level, domain, node class): level FLEET with domain 0, SPINE with a spine id, LEAF with a
leaf id."""

Restore = Callable[[], None]


@dataclass(frozen=True, slots=True)
class NodeClass:
    """Nodes that are interchangeable for capability checks."""

    id: int
    gpu_type: GpuTypeInfo
    gpus: int
    cpus: int
    memory_gb: int


class Grant(NamedTuple):
    """GPUs (a bit mask), CPUs and memory taken on one node by one holder. A named tuple, not
    a dataclass: placement search creates many of them."""

    node: int
    mask: int
    cpus: int
    memory_gb: int
    role: str = ""

    @property
    def gpus(self) -> int:
        return self.mask.bit_count()


_new_tuple = tuple.__new__


def mask_of(indices: Iterable[int]) -> int:
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


@lru_cache(maxsize=1 << 16)
def indices_of(mask: int) -> tuple[int, ...]:
    """The GPU indices set in ``mask``, ascending (memoised: a pure function of one int, and
    a fleet of 8-GPU nodes has 255 masks)."""
    out: list[int] = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def choose_gpus(free_mask: int, width: int, count: int) -> int:
    """Pick ``count`` free GPUs on a node of ``width`` GPUs.

    Best-fit contiguous run: the shortest run of adjacent free GPUs that holds ``count`` (so
    NVLink neighbours stay together and large runs stay whole); lowest free indices if no run
    is long enough. Memoised: a pure function of three ints, asked thousands of times a cycle
    about the few hundred masks an 8-GPU node can have; a bit walk per call costs more."""
    best_start, best_len = -1, width + 1
    run_start, run_len = 0, 0
    for i in range(width + 1):
        if i < width and free_mask >> i & 1:
            if run_len == 0:
                run_start = i
            run_len += 1
            continue
        if count <= run_len < best_len:
            best_start, best_len = run_start, run_len
        run_len = 0
    if best_start >= 0:
        return ((1 << count) - 1) << best_start
    mask, taken, i = 0, 0, 0
    while taken < count and i < width:
        if free_mask >> i & 1:
            mask |= 1 << i
            taken += 1
        i += 1
    return mask


_node_name = attrgetter("name")


def _check_nodes(ordered: Sequence[NodeInfo], twice: bool) -> None:
    """The first node in name order given twice (``twice``: some is) or with a GPU count
    out of range, whichever comes first, is a :class:`SnapshotError`."""
    bad = next((i for i, node in enumerate(ordered) if not 0 <= node.gpus <= 4096), len(ordered))
    # sorted by name, a name given twice is given by neighbours (the second one is named)
    again = next(i for i in range(1, len(ordered)) if ordered[i].name == ordered[i - 1].name) \
        if twice else len(ordered)
    if again <= bad and again < len(ordered):
        raise SnapshotError(f"node {ordered[again].name!r} appears twice in the snapshot")
    if bad < len(ordered):
        node = ordered[bad]
        raise SnapshotError(f"node {node.name!r} has {node.gpus} GPUs; expected 0..4096")


class ClusterState:
    """Mutable per-cycle view of who holds which GPUs, with the indexes described above."""

    def __init__(self, nodes: Sequence[NodeInfo], gpu_types: Mapping[str, GpuTypeInfo],
                 *, indexed: bool = True) -> None:
        ordered = sorted(nodes, key=_node_name)
        self.nodes: list[NodeInfo] = ordered
        self.index_of: dict[str, int] = {node.name: i for i, node in enumerate(ordered)}
        _check_nodes(ordered, twice=len(self.index_of) < len(ordered))
        self.classes: list[NodeClass] = []
        class_ids: dict[tuple[str, int, int, int], int] = {}
        leaf_ids: dict[tuple[str, str], int] = {}
        spine_ids: dict[str, int] = {}
        self.node_class: list[int] = []
        self.leaf: list[int] = []
        self.spine: list[int] = []
        self.leaf_names: list[tuple[str, str]] = []
        self.spine_names: list[str] = []
        self.leaves_of_spine: dict[int, list[int]] = {}
        for node in ordered:
            ckey = (node.gpu_type, node.gpus, node.cpus, node.memory_gb)
            c = class_ids.get(ckey)
            if c is None:
                c = class_ids[ckey] = len(self.classes)
                info = gpu_types.get(node.gpu_type, GpuTypeInfo(node.gpu_type, 0))
                self.classes.append(NodeClass(c, info, node.gpus, node.cpus, node.memory_gb))
            self.node_class.append(c)
            spine = spine_ids.get(node.spine)
            if spine is None:
                spine = spine_ids[node.spine] = len(self.spine_names)
                self.spine_names.append(node.spine)
                self.leaves_of_spine[spine] = []
            lkey = (node.spine, node.leaf)
            leaf = leaf_ids.get(lkey)
            if leaf is None:
                leaf = leaf_ids[lkey] = len(self.leaf_names)
                self.leaf_names.append(lkey)
                self.leaves_of_spine[spine].append(leaf)
            self.leaf.append(leaf)
            self.spine.append(spine)
        # one comprehension per column: cheaper than appends in the loop above
        # (the member read once: an enum's members are slow class attributes, 0.1 µs a read)
        ready_state = NodeState.READY
        self.ready: list[bool] = [node.state is ready_state for node in ordered]
        self.free_mask: list[int] = [(1 << node.gpus) - 1 for node in ordered]
        self.free_gpus: list[int] = [node.gpus for node in ordered]
        self.free_cpus: list[int] = [node.cpus for node in ordered]
        self.free_mem: list[int] = [node.memory_gb for node in ordered]

        # Buckets and free sums (ready nodes only) are built by ``build_indexes`` once the
        # running jobs are loaded, so loading does not move nodes between buckets.
        self.buckets: dict[IndexKey, list[dict[int, None]]] = {}
        self.free_sum: dict[IndexKey, int] = {}
        self.domains_of_class: dict[tuple[int, int], list[int]] = {}
        self._keys: list[tuple[IndexKey, IndexKey, IndexKey]] = [
            ((FLEET, 0, c), (SPINE, spine, c), (LEAF, leaf, c))
            for c, spine, leaf in zip(self.node_class, self.spine, self.leaf, strict=True)]
        self._indexed = False
        # Capacity of every node, ready or not: what the fleet could ever offer.
        self.class_node_count: list[int] = [0] * len(self.classes)
        for c in self.node_class:
            self.class_node_count[c] += 1
        self.holdings: dict[Holder, list[Grant]] = {}
        self._masks: dict[tuple[tuple[int, ...], int], int] = {}
        """GPU mask per (GPU indices, node width) checked by :meth:`grants_of`."""
        # When each node's current holders will be gone at the latest (runtime limits; inf
        # when some holder has none; 0 for an idle node). Only read by score plugins.
        self.busy_until: list[float] = [0.0] * len(ordered)
        self._capacity: dict[tuple[int, int], dict[int, int]] | None = None
        if indexed:
            self.build_indexes()

    def build_indexes(self) -> None:
        """Bucket every ready node by its current free GPUs (call once, after loading)."""
        all_buckets, free_sum = self.buckets, self.free_sum
        for i, node in enumerate(self.nodes):
            if not self.ready[i]:
                continue
            c = self.node_class[i]
            free = self.free_gpus[i]
            for key in self._keys[i]:
                buckets = all_buckets.get(key)
                if buckets is None:
                    buckets = all_buckets[key] = [{} for _ in range(node.gpus + 1)]
                    free_sum[key] = 0
                    if key[0] != FLEET:
                        self.domains_of_class.setdefault((key[0], c), []).append(key[1])
                buckets[free][i] = None
                free_sum[key] += free
        self._indexed = True

    # ------------------------------------------------------------------ index maintenance

    def _move(self, node: int, old_free: int, new_free: int) -> None:
        if not self._indexed or not self.ready[node] or old_free == new_free:
            return
        free_sum = self.free_sum
        all_buckets = self.buckets
        for key in self._keys[node]:
            buckets = all_buckets[key]
            del buckets[old_free][node]
            buckets[new_free][node] = None
            free_sum[key] += new_free - old_free

    # ------------------------------------------------------------------ taking and giving

    def take(self, holder: Holder, grant: Grant) -> None:
        """Give ``grant`` to ``holder``. Raises :class:`SnapshotError` if a GPU is not free."""
        n = grant.node
        if grant.mask & ~self.free_mask[n]:
            clash = indices_of(grant.mask & ~self.free_mask[n])
            owners = sorted(
                h[1] for h, gs in self.holdings.items() for g in gs if g.node == n and g.mask & grant.mask
            )
            raise SnapshotError(
                f"GPUs {list(clash)} of node {self.nodes[n].name!r} are held twice: by "
                f"{holder[1]!r} and by {owners}; every GPU must have at most one holder"
            )
        old = self.free_gpus[n]
        self.free_mask[n] &= ~grant.mask
        new = self.free_gpus[n] = old - grant.mask.bit_count()
        self.free_cpus[n] -= grant.cpus
        self.free_mem[n] -= grant.memory_gb
        self._move(n, old, new)
        held = self.holdings.get(holder)
        if held is None:
            self.holdings[holder] = [grant]
        else:
            held.append(grant)

    def load(self, holder: Holder, grants: list[Grant]) -> None:
        """:meth:`take` each grant, in order, for a running job loaded before
        :meth:`build_indexes` (so there is no index to move): the cycle loads thousands."""
        if self._indexed:
            raise RuntimeError("ClusterState.load() is for loading, before build_indexes()")
        free_mask, free_gpus = self.free_mask, self.free_gpus
        free_cpus, free_mem = self.free_cpus, self.free_mem
        for grant in grants:
            n = grant.node
            if grant.mask & ~free_mask[n]:
                self.take(holder, grant)  # raises, naming the GPUs held twice
            free_mask[n] &= ~grant.mask
            free_gpus[n] -= grant.mask.bit_count()
            free_cpus[n] -= grant.cpus
            free_mem[n] -= grant.memory_gb
            held = self.holdings.get(holder)
            if held is None:
                self.holdings[holder] = [grant]
            else:
                held.append(grant)

    def _give_back(self, grant: Grant) -> None:
        n = grant.node
        old = self.free_gpus[n]
        self.free_mask[n] |= grant.mask
        new = self.free_gpus[n] = old + grant.mask.bit_count()
        self.free_cpus[n] += grant.cpus
        self.free_mem[n] += grant.memory_gb
        self._move(n, old, new)

    def release(self, holder: Holder) -> list[Grant]:
        """Free everything ``holder`` holds; returns what it held."""
        grants = self.holdings.pop(holder, [])
        for grant in grants:
            self._give_back(grant)
        return grants

    def give_back_last(self, holder: Holder) -> None:
        """Free the grant ``holder`` took last (a search undoing its last step)."""
        held = self.holdings[holder]
        grant = held.pop()
        if not held:
            del self.holdings[holder]
        self._give_back(grant)

    def transfer(self, giver: Holder, holder: Holder) -> None:
        """Give everything ``giver`` holds to ``holder``: the state ends as after
        ``release(giver)`` and taking each of its grants for ``holder`` in order."""
        grants = self.holdings.pop(giver, [])
        held = self.holdings.get(holder)
        if held is None:
            self.holdings[holder] = grants
        else:
            held.extend(grants)

    def release_part(self, holder: Holder, part: Sequence[Grant]) -> None:
        """Free ``part`` of ``holder``'s grants (an elastic job giving up replicas). Each grant
        in ``part`` must be covered by one grant of the holder on the same node."""
        held = self.holdings.get(holder, [])
        for piece in part:
            for k, g in enumerate(held):
                if g.node == piece.node and piece.mask & ~g.mask == 0:
                    rest = Grant(g.node, g.mask & ~piece.mask, g.cpus - piece.cpus,
                                 g.memory_gb - piece.memory_gb, g.role)
                    if rest.mask:
                        held[k] = rest
                    else:
                        del held[k]
                    self._give_back(piece)
                    break
            else:
                raise SnapshotError(
                    f"{holder[1]!r} does not hold GPUs {list(indices_of(piece.mask))} of node "
                    f"{self.nodes[piece.node].name!r}"
                )
        if not held:
            self.holdings.pop(holder, None)

    def simulate_removal(self, holder: Holder) -> Restore:
        """Free ``holder``'s GPUs as a what-if; call the returned function to undo it."""
        grants = self.release(holder)

        def restore() -> None:
            for grant in grants:
                self.take(holder, grant)

        return restore

    def simulate_return(self, pieces: Iterable[Grant]) -> Restore:
        """Free ``pieces`` (GPUs, CPUs and memory held by whoever holds them now) as a what-if:
        the state a later time finds once they are given back. GPUs already free are skipped;
        the holders' grants are left as they are. Call the returned function to undo it."""
        freed: list[Grant] = []
        free_mask = self.free_mask
        for g in pieces:
            bits = g.mask & ~free_mask[g.node]
            piece = g if bits == g.mask else Grant(g.node, bits, g.cpus, g.memory_gb)
            if piece.mask or piece.cpus or piece.memory_gb:
                self._give_back(piece)
                freed.append(piece)

        def restore() -> None:
            for g in reversed(freed):
                n = g.node
                old = self.free_gpus[n]
                self.free_mask[n] &= ~g.mask
                new = self.free_gpus[n] = old - g.mask.bit_count()
                self.free_cpus[n] -= g.cpus
                self.free_mem[n] -= g.memory_gb
                self._move(n, old, new)

        return restore

    def simulate_partial_removal(self, holder: Holder, part: Sequence[Grant]) -> Restore:
        self.release_part(holder, part)

        def restore() -> None:
            for grant in part:
                self.take(holder, grant)

        return restore

    # ------------------------------------------------------------------ queries

    def fits(self, node: int, member: Member) -> bool:
        return (
            self.free_gpus[node] >= member.gpus
            and self.free_cpus[node] >= member.cpus
            and self.free_mem[node] >= member.memory_gb
        )

    def mark_busy(self, grants: Iterable[Grant], until: float) -> None:
        """Record that the holder of ``grants`` keeps their nodes busy until ``until``."""
        for g in grants:
            if until > self.busy_until[g.node]:
                self.busy_until[g.node] = until

    def capacity_by_domain(self, level: int, node_class: int) -> dict[int, int]:
        """GPUs of every node (ready or not) of ``node_class`` per domain of ``level``. (Built
        on the first question: only gangs bound to one leaf switch or spine ask, once per
        shape, and most cycles never.)"""
        if self._capacity is None:
            domain_gpus: dict[IndexKey, int] = {}
            for node, keys in zip(self.nodes, self._keys, strict=True):
                for key in keys:
                    domain_gpus[key] = domain_gpus.get(key, 0) + node.gpus
            capacity: dict[tuple[int, int], dict[int, int]] = {}
            for (lvl, domain, c), gpus in domain_gpus.items():
                capacity.setdefault((lvl, c), {})[domain] = gpus
            self._capacity = capacity
        return self._capacity.get((level, node_class), {})

    def widest(self, classes: Iterable[int]) -> int:
        """GPUs of the largest node among ``classes``."""
        best = 0
        for c in classes:
            if self.classes[c].gpus > best:
                best = self.classes[c].gpus
        return best

    def free_in(self, level: int, domain: int, classes: Iterable[int]) -> int:
        total = 0
        for c in classes:
            total += self.free_sum.get((level, domain, c), 0)
        return total

    def largest_free_block(self, classes: Iterable[int]) -> int:
        """Most free GPUs on one ready node among ``classes``."""
        best = 0
        for c in classes:
            buckets = self.buckets.get((FLEET, 0, c))
            if buckets is None:
                continue
            for free in range(len(buckets) - 1, best, -1):
                if buckets[free]:
                    best = free
                    break
        return best

    def nodes_with_free(self, classes: Iterable[int], at_least: int) -> int:
        count = 0
        for c in classes:
            buckets = self.buckets.get((FLEET, 0, c))
            if buckets is None:
                continue
            for free in range(at_least, len(buckets)):
                count += len(buckets[free])
        return count

    def placements(self, grants: Iterable[Grant]) -> tuple[GpuPlacement, ...]:
        """Grants as sorted :class:`GpuPlacement` values (node name, then role)."""
        merged: dict[tuple[int, str], int] = {}
        for g in grants:
            merged[(g.node, g.role)] = merged.get((g.node, g.role), 0) | g.mask
        # (node name, role) is unique per merged entry, so sorting on it alone (no key
        # function) gives the order of (node, role, gpu_indices)
        named = sorted([(self.nodes[n].name, role, mask) for (n, role), mask in merged.items()])
        return tuple([gpu_placement(name, indices_of(mask), role) for name, role, mask in named])

    def grants_of(self, placements: Iterable[GpuPlacement], cpus_per_gpu: int,
                  memory_gb_per_gpu: int, job_id: str) -> list[Grant]:
        """Translate a running job's placements into grants, validating them."""
        grants: list[Grant] = []
        index_of = self.index_of
        masks = self._masks
        for p in placements:
            n = index_of.get(p.node)
            if n is None:
                raise SnapshotError(
                    f"running job {job_id!r} holds GPUs on unknown node {p.node!r}"
                )
            width = self.nodes[n].gpus
            # a fleet's placements repeat a few index tuples: each is checked and turned into
            # a mask once per width
            mask = masks.get((p.gpu_indices, width), -1)
            if mask < 0:
                mask = 0
                for i in p.gpu_indices:
                    if not 0 <= i < width:
                        bad = [j for j in p.gpu_indices if not 0 <= j < width]
                        raise SnapshotError(
                            f"running job {job_id!r} holds GPU indices {bad} on node "
                            f"{p.node!r}, which has GPUs 0..{width - 1}"
                        )
                    mask |= 1 << i
                masks[(p.gpu_indices, width)] = mask
            gpus = mask.bit_count()
            # (built as a tuple: a named tuple's own constructor is a Python function, and the
            # cycle loads every running job's grants)
            grants.append(_new_tuple(Grant, (n, mask, cpus_per_gpu * gpus, memory_gb_per_gpu * gpus,
                                             p.role)))
        return grants
