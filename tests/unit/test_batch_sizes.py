"""Batch sizes from the trace (`semantics.batch_size = "trace"`) and the throughput table file.

The peer's per-epoch patterns (actors/cluster/batch_sizes.py), the regimes
they become, run times from a throughput table in either JSON layout
(actors/cluster/throughputs.py), and what is listed as not honoured.
"""

from __future__ import annotations

import pytest

from actors.cluster.batch_sizes import (
    accordion_pattern,
    apply_batch_sizes,
    epochs_of,
    gns_pattern,
    regimes_of,
)
from actors.cluster.throughputs import ANY_GPUS, load_throughputs, parse_throughputs
from actors.policies.cluster import job_pace
from actors.policies.cluster import perf_model as pm
from actors.policies.cluster.api import Regime, TraceJob
from emulator.errors import InputError
from emulator.units import S
from tests.support.paths import DATA

TABLE = load_throughputs(DATA / "throughputs_small.json")


def lm(mode: str = "accordion", batch: int = 20, steps: int = 59_680, gpus: int = 1) -> TraceJob:
    # 59,680 steps at B = 20: ⌈59675 / 20⌉ = 2984 steps an epoch, 20 epochs.
    return TraceJob(
        job_id="0",
        submit_us=0,
        gpus=gpus,
        model="lstm",
        duration_us=1000 * S,
        iterations=steps,
        mode=mode,  # type: ignore[arg-type]
        batch_size=batch,
    )


# ---- the peer's patterns --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "batch", "epochs", "expected"),
    [
        # LM: critical regime is the first 10 epochs; past them (and past 30%
        # of 20 = 6) the largest batch size, 80.
        ("lstm", 20, 20, [20] * 10 + [80] * 10),
        # A job that starts at its model's largest batch size never scales.
        ("lstm", 80, 20, [80] * 20),
        # Accordion never scales the Transformer.
        ("transformer", 16, 20, [16] * 20),
        # ResNet-18 at 16: critical first 10 epochs; 30% of 40 = 12 epochs at B first.
        ("resnet18", 16, 40, [16] * 13 + [256] * 27),
        # ResNet-50: every epoch e % 30 < 10 is critical: 0-9, 30-39 small.
        ("resnet50", 16, 40, [16] * 13 + [128] * 17 + [16] * 10),
    ],
)
def test_accordion_patterns(model: str, batch: int, epochs: int, expected: list[int]):
    assert accordion_pattern(model, batch, epochs) == expected


@pytest.mark.parametrize(
    ("model", "batch", "epochs", "gpus", "expected"),
    [
        # LM at 20 on 1 GPU, more than 11 epochs: ×2 for epochs 11-40, ×4 from 41
        # on, except the last epoch, which the peer's loop leaves at B.
        ("lstm", 20, 50, 1, [20] * 11 + [40] * 30 + [80] * 8 + [20]),
        # Too few epochs for the rule (needs more than 11): never scales.
        ("lstm", 20, 11, 1, [20] * 11),
        # A gang size the peer has no rule for never scales.
        ("lstm", 20, 50, 8, [20] * 50),
        # The first stretch reaches the last epoch: ×2 from 11 on, capped at 80.
        ("lstm", 40, 15, 1, [40] * 11 + [80] * 4),
        # The Transformer has no GNS rule.
        ("transformer", 16, 50, 1, [16] * 50),
    ],
)
def test_gns_patterns(model: str, batch: int, epochs: int, gpus: int, expected: list[int]):
    assert gns_pattern(model, batch, epochs, gpus) == expected


def test_epochs_need_steps_a_batch_size_and_a_known_dataset():
    assert epochs_of(lm()) == 20
    assert epochs_of(lm(steps=59_681)) == 21  # one step into a 21st epoch
    assert epochs_of(lm(batch=0)) is None
    assert epochs_of(TraceJob(job_id="a", submit_us=0, gpus=1, model="a3c", duration_us=1)) is None


def test_stretches_of_equal_batch_size_become_regimes():
    regimes = regimes_of([20, 20, 80, 80], [1.0, 1.0, 1.6, 1.6])
    assert regimes == (
        Regime(start=0.0, end=0.5, batch_scale=1, throughput=1.0),
        Regime(start=0.5, end=1.0, batch_scale=4, throughput=1.6),
    )


# ---- run times from the throughput table -----------------------------------------------------
def test_run_time_from_the_table_and_the_pattern():
    # LM at 20 (10 it/s): an epoch is 59675 / 20 / 10 = 298.375 s; at 80 (4 it/s)
    # 59675 / 80 / 4 = 186.484375 s, 1.6× faster. 20 epochs at 20: 5967.5 s of
    # work at B; half of it at speed 1.6: 10·298.375 + 10·186.484 = 4848.59 s.
    (job,), notes = apply_batch_sizes([lm()], "trace", TABLE)
    assert notes == ()
    assert job.duration_us == 5_967_500_000
    assert job.regimes == (
        Regime(start=0.0, end=0.5, batch_scale=1, throughput=1.0),
        Regime(start=0.5, end=1.0, batch_scale=4, throughput=pytest.approx(1.6)),
    )
    alone = job_pace.run_time_us(0, job.duration_us, job.duration_us, job.schedule, 1.0)
    assert alone == pytest.approx(4_848_593_750, abs=2)


def test_without_a_table_the_trace_duration_stays_and_doublings_use_the_gain():
    # Two doublings (20 → 80) speed up by 1.7^(2/3) = 1.4244.
    (job,), _ = apply_batch_sizes([lm()], "trace", None)
    assert job.duration_us == 1000 * S
    assert job.regimes[1].throughput == pytest.approx(pm.GAIN_PER_DOUBLING**2)


def test_a_job_at_the_largest_batch_size_keeps_one_static_regime():
    (job,), _ = apply_batch_sizes([lm(batch=80)], "trace", TABLE)
    assert job.regimes == (Regime(start=0.0, end=1.0, batch_scale=1, throughput=1.0),)
    # 59,680 steps at 80: ⌈59675/80⌉ = 746 an epoch, 80 epochs of 186.484 s.
    assert job.duration_us == round(80 * 59675 / 80 / 4 * S)


def test_under_model_batch_sizes_the_traces_are_listed_and_dropped():
    jobs, notes = apply_batch_sizes([lm(), lm(batch=80)], "model", TABLE)
    assert [j.batch_size for j in jobs] == [0, 0]
    assert [j.regimes for j in jobs] == [(), ()]
    assert [(n.what, n.rows) for n in notes] == [
        ("batch size (job type)", 2),
        (f"throughputs {TABLE.source}", 2),
    ]


def test_what_the_table_lacks_is_listed():
    # The table has LM at 20 and 80 only: a job at 10 scales to 80 under
    # Accordion; neither its own speed nor its duration can come from the table.
    (job,), notes = apply_batch_sizes([lm(batch=10, steps=119_360)], "trace", TABLE)
    assert job.duration_us == 1000 * S
    assert [n.what for n in notes] == ["batch-size schedule"]
    noted = apply_batch_sizes(
        [TraceJob(job_id="x", submit_us=0, gpus=1, model="a3c", duration_us=1)], "trace", TABLE
    )[1]
    assert "mode's regimes kept" in noted[0].why


# ---- the table file's two layouts -----------------------------------------------------------
def test_mastemu_layout():
    assert TABLE.iterations_per_s("lstm", 20, 1) == 10.0
    assert TABLE.iterations_per_s("lstm", 20, 8) == 10.0  # a number: any gang size
    assert TABLE.iterations_per_s("resnet18", 16, 2) == 45.0
    assert TABLE.iterations_per_s("resnet18", 16, 4) is None
    assert TABLE.table["transformer"][128] == {ANY_GPUS: 1.5}


def test_gavel_layout_reads_the_isolated_throughput_of_one_worker_type():
    table = load_throughputs(DATA / "gavel_throughputs_small.json")
    assert table.iterations_per_s("lstm", 20, 1) == 10.0  # v100's "null"
    assert table.iterations_per_s("resnet18", 16, 2) == 45.0
    assert "a3c" not in table.table  # no batch size in its job type
    k80 = load_throughputs(DATA / "gavel_throughputs_small.json", worker="k80")
    assert k80.iterations_per_s("lstm", 80, 1) == 1.0


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"LM": {"20": 0}}', "LM.20"),
        ('{"LM": {"twenty": 3.0}}', "LM.twenty"),
        ('{"LM": {"20": {"1": "fast"}}}', "LM.20.1"),
        ('{"LM": 3}', "LM"),
        ('{"p100": {"(\'LM (batch size 20)\', 1)": {"null": 1.0}}}', "v100"),
        ("[1, 2]", ""),
        ("{not json", ""),
    ],
)
def test_a_bad_table_names_the_file_and_the_key(text: str, path: str):
    with pytest.raises(InputError) as error:
        parse_throughputs(text, "t.json")
    assert (error.value.source, error.value.path) == ("t.json", path)
