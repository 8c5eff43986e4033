from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rmeval.stats.bootstrap import (
    index_weights,
    mean_of_prompt_values,
    percentile_ci,
    prompt_bootstrap,
    ratio_of_sums,
    resample_indices,
)


def test_index_weights_counts_draws():
    rng = np.random.default_rng(0)
    idx = resample_indices(7, 50, rng)
    w = index_weights(idx, 7)
    for b in range(50):
        expect = np.zeros(7)
        for j in idx[b]:
            expect[j] += 1
        np.testing.assert_array_equal(w[b], expect)
    assert (w.sum(axis=1) == 7).all()


def test_mean_ci_matches_scipy_percentile_bootstrap():
    rng = np.random.default_rng(1)
    per_prompt = rng.gamma(2.0, 1.0, size=150)
    ours = mean_of_prompt_values(per_prompt, n_boot=2000, rng=11)
    ref = stats.bootstrap((per_prompt,), np.mean, n_resamples=2000, method="percentile",
                          confidence_level=0.95, random_state=np.random.default_rng(12))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours["estimate"] == pytest.approx(per_prompt.mean())
    # Monte Carlo tolerance: two independent 2,000-resample runs of the same bootstrap
    assert ours["ci95"][0] == pytest.approx(ref.confidence_interval.low, abs=0.08 * width)
    assert ours["ci95"][1] == pytest.approx(ref.confidence_interval.high, abs=0.08 * width)
    assert ours["n_prompts"] == 150 and ours["n_boot"] == 2000


def test_pooled_ratio_matches_scipy_paired_bootstrap_over_prompts():
    # responses per prompt vary; the statistic (pooled mean over responses) resamples prompts
    rng = np.random.default_rng(2)
    k = 120
    n = rng.integers(1, 5, size=k).astype(float)
    sums = np.array([rng.normal(1.0, 1.0, size=int(m)).sum() for m in n])

    def pooled(s, c, axis=-1):
        return s.sum(axis=axis) / c.sum(axis=axis)

    ref = stats.bootstrap((sums, n), pooled, paired=True, vectorized=True, n_resamples=2000,
                          method="percentile", random_state=np.random.default_rng(3))
    ours = prompt_bootstrap(np.column_stack([n, sums]), ratio_of_sums(1, 0), n_boot=2000, rng=4)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours["estimate"] == pytest.approx(sums.sum() / n.sum())
    assert ours["ci95"][0] == pytest.approx(ref.confidence_interval.low, abs=0.08 * width)
    assert ours["ci95"][1] == pytest.approx(ref.confidence_interval.high, abs=0.08 * width)


def test_percentile_ci_ignores_undefined_resamples():
    boot = np.concatenate([np.linspace(0, 1, 1001), [np.nan, np.inf]])
    lo, hi = percentile_ci(boot)
    assert lo == pytest.approx(0.025) and hi == pytest.approx(0.975)
    assert all(np.isnan(percentile_ci(np.array([np.nan]))))


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_resample_weights_drawn_in_blocks_equal_one_draw(block, monkeypatch):
    """The blocks (bootstrap.DRAW_BLOCK cells) keep the generator's stream: the matrix equals the
    one-draw matrix built here from numpy directly, and the generator is left where one draw leaves it."""
    import rmeval.stats.bootstrap as bootstrap

    monkeypatch.setattr(bootstrap, "DRAW_BLOCK", block)
    for k, n_boot in [(7, 33), (50, 300), (1, 9), (201, 77), (0, 4)]:
        ours, ref = np.random.default_rng(3), np.random.default_rng(3)
        w = bootstrap.resample_weights(k, n_boot, ours)
        idx = ref.integers(0, k, size=(n_boot, k)) if k else np.zeros((n_boot, 0), int)
        expect = np.zeros((n_boot, k))
        for b in range(n_boot):
            np.add.at(expect[b], idx[b], 1.0)
        np.testing.assert_array_equal(w, expect)
        assert ours.random() == ref.random()


def test_check_memory_names_the_setting_the_need_and_the_machine(monkeypatch):
    import rmeval.stats.bootstrap as bootstrap
    from rmcore.errors import ConfigError

    monkeypatch.setattr(bootstrap, "machine_memory", lambda: 16 * 1024**3)
    bootstrap.check_memory(16 * 1024**3, "--n-boot 10")  # fits
    with pytest.raises(ConfigError, match=r"^--n-boot 10: the bootstrap needs about 175 TiB of memory; this "
                                          r"machine has 16 GiB$"):
        bootstrap.check_memory(175 * 1024**4, "--n-boot 10")
    assert bootstrap.format_bytes(1536) == "1.5 KiB" and bootstrap.format_bytes(3) == "3 B"
    assert bootstrap.machine_memory() is None or bootstrap.machine_memory() > 0
