"""Static placement: every workload gets one region with all its data and its hardware."""

from __future__ import annotations

from actors.policies.mast.static_placement import colocate
from emulator.units import H as HOURS
from store.mast.records import DataTable, JobSpec, WorkloadSpec


def workload(wid: str, tables: tuple[str, ...], gpu_type: str | None = "A100") -> WorkloadSpec:
    job = (
        JobSpec(name="t", gpu_type=gpu_type, gpus=8, work_us=HOURS, input_tables=tables)
        if gpu_type
        else JobSpec(name="t", cpu_machines=2, work_us=HOURS, input_tables=tables)
    )
    return WorkloadSpec(id=wid, tenant="a", submit_at_us=0, jobs=(job,))


TABLES = [
    DataTable(name="big", size_bytes=900, home_region="east"),
    DataTable(name="small", size_bytes=100, home_region="west"),
    DataTable(name="solo", size_bytes=5, home_region="west"),
]
HARDWARE = {"east": {"A100", "cpu"}, "west": {"A100", "H100"}, "south": {"V100", "cpu"}}


def test_the_region_with_most_bytes_gets_the_missing_replicas() -> None:
    # big (900 B) lives in east, small (100 B) in west: east holds 900 of 1000 bytes,
    # west 100, so small is replicated to east.
    out = {t.name: t for t in colocate([workload("w", ("big", "small"))], TABLES, HARDWARE)}
    assert out["small"].replicas == ("east",)
    assert out["big"].replicas == ()


def test_hardware_limits_the_candidates() -> None:
    # H100 exists only in west: big is copied there although east holds more bytes.
    out = {t.name: t for t in colocate([workload("w", ("big", "small"), "H100")], TABLES, HARDWARE)}
    assert out["big"].replicas == ("west",)
    assert out["small"].replicas == ()


def test_colocated_workloads_add_nothing_and_missing_hardware_is_left_alone() -> None:
    assert colocate([workload("w", ("small", "solo"))], TABLES, HARDWARE) == TABLES
    assert colocate([workload("w", ("big",), "TPU")], TABLES, HARDWARE) == TABLES


def test_cpu_workloads_need_a_region_with_cpu_machines() -> None:
    # solo lives in west, which has no CPU machines: east (ties with south at 0 bytes,
    # name order) gets a replica.
    out = {t.name: t for t in colocate([workload("w", ("solo",), None)], TABLES, HARDWARE)}
    assert out["solo"].replicas == ("east",)
