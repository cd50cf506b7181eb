"""Inventory: GPU type names the control plane knows, from what NVML calls the devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.agent.inventory import Nvml, gpu_type_name, host_cpus, host_memory_gb


@pytest.mark.parametrize(
    ("device", "memory_mb", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
        ("NVIDIA L40S", 46068, "L40S-45GB"),
        ("Tesla V100-SXM2-32GB", 32768, "V100-32GB"),
    ],
    ids=["h100-name-carries-memory", "a100-40", "a100-80", "l40s-memory-from-mib", "v100-tesla-prefix"],
)
def test_gpu_type_names_follow_the_model_and_memory(device: str, memory_mb: int, expected: str) -> None:
    assert gpu_type_name(device, memory_mb) == expected


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has an NVIDIA driver")
def test_without_nvidia_devices_nvml_is_absent_and_the_host_is_measured() -> None:
    # No NVIDIA driver here: the agent falls back to a declared inventory.
    assert Nvml.open() is None
    assert host_cpus() >= 1 and host_memory_gb() >= 1
