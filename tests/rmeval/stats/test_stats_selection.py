from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from rmeval.stats.selection import _top_mean, top_selection


def _independent_top(df: pd.DataFrame, fraction: float) -> tuple[float, float]:
    """Plain pandas reference: leave-one-out centring and nlargest."""
    g = df.groupby("g")
    df = df.assign(c=df["s"] - (g["s"].transform("sum") - df["s"]) / (g["s"].transform("size") - 1))
    m = int(round(fraction * len(df)))
    return df.nlargest(m, "s")["h"].mean(), df.nlargest(m, "c")["h"].mean()


def _sim(k, rng, prompt_sd=2.0):
    u = rng.normal(scale=prompt_sd, size=k)
    q = rng.normal(size=(k, 2))
    return pd.DataFrame({"g": np.repeat(np.arange(k), 2), "s": (u[:, None] + q).ravel(),
                         "h": (q + 0.2 * rng.normal(size=(k, 2))).ravel()})


def test_point_estimates_match_pandas_reference():
    rng = np.random.default_rng(0)
    df = _sim(37, rng)
    raw, cen = _independent_top(df, 0.3)
    res = top_selection(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=200, rng=0)
    assert res["n_kept"] == round(0.3 * 74)
    assert res["top30_raw"]["estimate"] == pytest.approx(raw, abs=1e-12)
    assert res["top30_centered"]["estimate"] == pytest.approx(cen, abs=1e-12)
    assert res["delta"]["estimate"] == pytest.approx(cen - raw, abs=1e-12)
    g = df.groupby("g")
    hc = df["h"] - (g["h"].transform("sum") - df["h"])
    c = df["s"] - (g["s"].transform("sum") - df["s"])
    assert res["spearman"]["raw_vs_raw"] == pytest.approx(spearmanr(df["s"], df["h"])[0])
    assert res["spearman"]["centered_vs_centered"] == pytest.approx(spearmanr(c, hc)[0])


def test_weighted_cut_equals_explicit_duplication():
    rng = np.random.default_rng(1)
    df = _sim(15, rng)
    codes = df["g"].to_numpy()
    draw = rng.integers(0, 15, size=15)  # one bootstrap resample of prompts
    w_prompt = np.bincount(draw, minlength=15).astype(float)
    order = np.argsort(-df["s"].to_numpy(), kind="stable")
    ours = _top_mean(order, df["h"].to_numpy(), w_prompt[codes][None, :], 0.3)[0]
    dup = pd.concat([df[df["g"] == p] for p in draw], ignore_index=True)
    m = int(round(0.3 * len(dup)))
    ref = dup.sort_values("s", ascending=False, kind="stable").head(m)["h"].mean()
    assert ours == pytest.approx(ref, abs=1e-12)


def test_planted_selection_difference_recovered():
    # score = large prompt offset + response quality; rating = quality. Raw global selection keeps
    # responses to "high-offset" prompts; centring removes the offset. The population difference is
    # computed on a very large independent sample with the pandas reference.
    big = _sim(100_000, np.random.default_rng(2))
    raw, cen = _independent_top(big, 0.3)
    true_delta = cen - raw
    assert true_delta > 0.2
    df = _sim(600, np.random.default_rng(3))
    res = top_selection(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=2000, rng=4)
    lo, hi = res["delta"]["ci95"]
    assert lo < true_delta < hi
    assert lo > 0


def test_singleton_prompts_dropped():
    res = top_selection(np.array([1.0, 2.0, 3.0, 0.5, 5.0]), np.array([1.0, 2.0, 3.0, 1.0, 4.0]),
                        np.array(["a", "a", "b", "b", "c"]), n_boot=50, rng=0)
    assert res["n_dropped"] == 1 and res["n_responses"] == 4
