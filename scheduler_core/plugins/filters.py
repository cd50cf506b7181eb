"""Filter plugins (phase 3): feasibility before fairness (seed 001 principle 15).

Seed rules: only ready nodes take new work; capability by GPU type and by device memory (a job
that needs 35 GB runs on 40 GB or 80 GB devices, seed 001 example 8.2); every dimension must
fit on the node (GPUs, CPUs, memory)."""

from __future__ import annotations

from scheduler_core.gang import Member
from scheduler_core.plugins.protocols import FilterPlugin
from scheduler_core.state import ClusterState, NodeClass
from scheduler_core.types import ReasonCode


class NodeReady:
    """Only ``READY`` nodes receive new work. Readiness is not capability: a down node may
    come back, so this filter never makes a job ``CanNeverRun``."""

    NAME = "node_ready"

    def capable(self, node_class: NodeClass, member: Member) -> ReasonCode | None:
        return None

    def admits(self, state: ClusterState, node: int, member: Member) -> ReasonCode | None:
        return None if state.ready[node] else ReasonCode.NODE_NOT_READY


class GpuCapability:
    """The node's GPU type is one the member accepts, with at least its device memory."""

    NAME = "gpu_capability"

    def capable(self, node_class: NodeClass, member: Member) -> ReasonCode | None:
        return None if member.accepts_type(node_class.gpu_type) else ReasonCode.NO_CAPABLE_NODE

    def admits(self, state: ClusterState, node: int, member: Member) -> ReasonCode | None:
        node_class = state.classes[state.node_class[node]]
        return self.capable(node_class, member)


class ResourceFit:
    """Multi-dimensional fit: GPUs, CPUs and memory on one node. ``capable`` compares with the
    node's size, ``admits`` with what is free now."""

    NAME = "resource_fit"

    def capable(self, node_class: NodeClass, member: Member) -> ReasonCode | None:
        if node_class.gpus < member.gpus:
            return ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS
        if node_class.cpus < member.cpus:
            return ReasonCode.INSUFFICIENT_CPU
        if node_class.memory_gb < member.memory_gb:
            return ReasonCode.INSUFFICIENT_MEMORY
        return None

    def admits(self, state: ClusterState, node: int, member: Member) -> ReasonCode | None:
        if state.free_gpus[node] < member.gpus:
            return ReasonCode.INSUFFICIENT_GPUS
        if state.free_cpus[node] < member.cpus:
            return ReasonCode.INSUFFICIENT_CPU
        if state.free_mem[node] < member.memory_gb:
            return ReasonCode.INSUFFICIENT_MEMORY
        return None


_: FilterPlugin = NodeReady()
_ = GpuCapability()
_ = ResourceFit()
