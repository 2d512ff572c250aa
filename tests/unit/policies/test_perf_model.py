"""The job performance model (policies/cluster/perf_model.py): tables, slowdown, costs, regimes."""

from __future__ import annotations

import itertools

import pytest

from actors.policies.cluster import perf_model as pm
from actors.policies.cluster.placement import TIERS

G = 1.7 ** (1 / 3)  # throughput gain of one batch-size doubling, 1.19348


@pytest.mark.parametrize(
    ("model", "tier", "gpus", "expected"),
    [
        # Machine tier and single GPUs are the consolidated baseline.
        ("ResNet-50", "machine", 8, 1.0),
        ("mobilenetv3", "network", 1, 1.0),
        # 8 GPUs use Table I as is: (1 + c_tier) / (1 + c_machine).
        ("ResNet-18", "network", 8, 28.49 / 1.07),  # 26.626
        ("vgg11", "rack", 8, 1.06 / 1.01),  # 1.0495
        ("MobileNetV3", "rack", 8, 10.40 / 1.42),  # 7.3239
        ("vgg19", "network", 8, 1.07 / 1.01),  # VGG11's row: 1.0594
        ("inception3", "network", 8, 1.38 / 1.12),  # ResNet-50's row: 1.2321
        # Unknown model: the per-tier medians 7.5% / 18% / 407.5%: 5.075 / 1.075 = 4.7209.
        ("gpt-foo", "network", 8, 5.075 / 1.075),
        # 4 GPUs: fractions scale by (3/4)/(7/8) = 6/7; BERT-large network
        # 7.15·6/7 = 6.12857, machine 0.08·6/7 = 0.068571 -> 7.12857/1.068571 = 6.6711.
        ("BERT large", "network", 4, (1 + 7.15 * 6 / 7) / (1 + 0.08 * 6 / 7)),
        # 16 GPUs: scale (15/16)/(7/8) = 15/14; ResNet-50 network 0.38·15/14 = 0.407143,
        # machine 0.12·15/14 = 0.128571 -> 1.407143 / 1.128571 = 1.24684.
        ("resnet50", "network", 16, (1 + 0.38 * 15 / 14) / (1 + 0.12 * 15 / 14)),
    ],
)
def test_slowdown_follows_dally_table_i(model: str, tier: str, gpus: int, expected: float) -> None:
    assert pm.slowdown(model, tier, gpus) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("model", [*pm.PROFILES, "unknown-model"])
@pytest.mark.parametrize("gpus", [2, 4, 8, 32])
def test_slowdown_is_at_least_one_and_grows_with_the_tier(model: str, gpus: int) -> None:
    values = [pm.slowdown(model, tier, gpus) for tier in TIERS]
    assert values[0] == 1.0
    assert values == sorted(values)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("VGG16", 0.743),  # Tiresias Table 6: 392 MB of 527.8 MB
        ("alexnet", 0.610),
        ("resnet_152", 0.039),
        ("googlenet", 0.146),
        ("ResNet-18", 0.202),  # ours: 2.36M of 11.69M parameters
        ("inception-v3", 0.086),  # alias of Table 6's Inception3
        ("no-such-model", 0.119),  # median of Table 6
    ],
)
def test_skew_comes_from_tiresias_table_6(model: str, expected: float) -> None:
    assert pm.skew(model) == expected


def test_every_table_model_has_a_source_and_high_skew_models_are_the_vgg_family() -> None:
    assert all(p.source for p in pm.PROFILES.values())
    high = sorted(name for name, p in pm.PROFILES.items() if p.skew > 0.5)
    assert high == ["alexnet", "vgg11", "vgg16", "vgg19"]
    assert pm.profile("ResNet-50") is pm.profile("resnet_50") is pm.PROFILES["resnet50"]
    assert pm.profile("whatever") is pm.DEFAULT_PROFILE


@pytest.mark.parametrize(
    ("model", "gpus", "checkpoint", "restore"),
    [
        # VGG19, 548.1 MB: pause 0.5 + 548.1/200 = 3.2405 s; resume on 8 GPUs
        # 5 + 2.7405 + 1·log2(8) = 10.7405 s.
        ("vgg19", 8, 3.2405, 10.7405),
        # GoogLeNet, 26.7 MB on 1 GPU: 0.5 + 0.1335 = 0.6335 s; 5 + 0.1335 = 5.1335 s.
        ("googlenet", 1, 0.6335, 5.1335),
        # ResNet-50, 97.7 MB on 4 GPUs: 0.9885 s; 5 + 0.4885 + 2 = 7.4885 s.
        ("resnet50", 4, 0.9885, 7.4885),
    ],
)
def test_checkpoint_and_restore_cost(
    model: str, gpus: int, checkpoint: float, restore: float
) -> None:
    assert pm.checkpoint_s(model) == pytest.approx(checkpoint)
    assert pm.restore_s(model, gpus) == pytest.approx(restore)


@pytest.mark.parametrize("mode", ["static", "gns", "accordion"])
def test_regimes_cover_all_progress_without_gaps(mode: str) -> None:
    rs = pm.regimes(mode)
    assert rs[0].start == 0.0 and rs[-1].end == 1.0
    assert all(a.end == b.start for a, b in itertools.pairwise(rs))
    # Throughput is a function of the batch size alone: the gain per doubling.
    assert all(r.throughput == pytest.approx(G ** (r.batch_scale.bit_length() - 1)) for r in rs)


@pytest.mark.parametrize(
    ("mode", "progress", "batch_scale", "throughput"),
    [
        ("static", 0.7, 1, 1.0),
        ("gns", 0.0, 1, 1.0),
        ("gns", 0.3, 2, G),
        ("gns", 0.99, 8, 1.7),  # three doublings: 32 -> 256 gives 1.7x (Shockwave Fig. 2)
        ("gns", 1.0, 8, 1.7),  # at or past the end: the last regime
        ("accordion", 0.05, 1, 1.0),  # critical: start of training
        ("accordion", 0.2, 4, G**2),
        ("accordion", 0.55, 1, 1.0),  # critical: after the decay at 50%
        ("accordion", 0.8, 1, 1.0),  # critical: after the decay at 75%
        ("accordion", 0.9, 4, G**2),
    ],
)
def test_regime_at(mode: str, progress: float, batch_scale: int, throughput: float) -> None:
    r = pm.regime_at(mode, progress)
    assert (r.batch_scale, r.throughput) == (batch_scale, pytest.approx(throughput))


def test_gns_only_grows_and_accordion_alternates_between_two_sizes() -> None:
    gns = [r.batch_scale for r in pm.regimes("gns")]
    assert gns == sorted(gns) and len(set(gns)) == 4
    acc = [r.batch_scale for r in pm.regimes("accordion")]
    assert set(acc) == {1, 4} and all(a != b for a, b in itertools.pairwise(acc))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("static", 1.0),
        # GNS: a quarter of the work at each of 1, g, g², g³:
        # 0.25·(1 + 0.83789 + 0.70207 + 0.58824) = 0.78205.
        ("gns", 0.25 * (1 + 1 / G + 1 / G**2 + 1 / G**3)),
        # Accordion: 30% at the small batch, 70% at 4x: 0.3 + 0.7/1.42440 = 0.79144.
        ("accordion", 0.3 + 0.7 / G**2),
    ],
)
def test_exclusive_factor(mode: str, expected: float) -> None:
    assert pm.exclusive_factor(mode) == pytest.approx(expected)
    assert pm.exclusive_factor(mode) <= 1.0


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown batch mode"):
        pm.regimes("elastic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gpus"):
        pm.slowdown("vgg11", "rack", 0)
    with pytest.raises(ValueError, match="gpus"):
        pm.restore_s("vgg11", 0)


def test_base_batch_size_from_shockwave_table_2() -> None:
    assert pm.base_batch_size("ResNet-18") == 16
    assert pm.base_batch_size("Recoder") == 512
    assert pm.base_batch_size("vgg16") == 32
