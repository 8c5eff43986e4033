"""Prioritisation controls of JudgeProfile (App. C.1, C.3, C.4): is the spread of fitted weights
across judges more than estimation noise, and how much do perception and weights each carry?

Each judge j has an own-perception fit (``rmeval.judges.analysis.priorities``): an L2 logistic
regression (C = 1, intercept b_j) of its stable verdict y_j(i) in {-1, +1} on its stable attribute
directions X_j(i, .) in {-1, 0, +1}, over the items where it gives a stable verdict. Normalised
weights are w~_j = w_j / mean_a |w_ja| (the paper's normalisation before dispersion).

**Identical-preference null** (C.1, C.4). Every judge is given the same true preference: the
mean observed weight vector w* = mean_j w_j and intercept b* = mean_j b_j. In each of R
repetitions (``null_repeats``, the paper's 20) each judge's verdicts are redrawn from its OWN
perception, y_j(i) ~ Bernoulli(sigmoid(b* + X_j(i) . w*)) on its fit items, and its weights are
refitted the same way. The null therefore carries each judge's own perception noise, coverage and
item count -- everything except a difference in priorities. Reported against it:

- the mean cross-judge Pearson and Spearman correlation of the weights, observed / null mean
  (the paper's Table 18 ratio);
- per attribute, the cross-judge standard deviation (ddof 1) of the normalised weights, against
  the null's mean and 95th percentile of the same SD (the paper: observed SD above the null 95th
  percentile on 85 of 87 attributes, median observed / null-mean ratio 2.16);
- per judge (the paper names no per-judge statistic; this is the standard one for "is this judge
  farther from the consensus than noise makes it"), its dispersion D_j = sqrt(mean_a (w~_ja -
  mean_k w~_ka)^2), the root-mean-square distance of its normalised weights from the panel's mean
  profile, against the null distribution of D_j: null mean, 95th percentile, ratio and the Monte
  Carlo p-value (1 + #{null D_j >= observed}) / (1 + R).

A repetition in which a judge's redrawn verdicts have one class cannot be fitted; that judge is left
out of that repetition (counted in ``n_failed_fits``).

**Component swaps** (C.3), in-sample on the target's own fit items and verdicts, with the
prediction sign(b + x . w) (+1 when positive, else -1, as scikit-learn predicts):

- own: the target's readings X_t with its own (w_t, b_t);
- perception swap: the donor's readings X_d of the same items with the target's (w_t, b_t);
- weight swap: the target's readings X_t with the donor's coefficients w_d and the target's own
  intercept b_t (only the attribute coefficients are replaced).

The donor is ``donor`` when given, else the judge with the highest stable rate (the most
order-consistent perception; the paper's donor was its large reference judge). The paper's
caution applies: the swaps change objects of different size, so the drops measure sensitivity to
each replacement, not the relative causal contribution of perception and prioritisation.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from rmcore.errors import ConfigError
from rmcore.io.markdown import num, table

from .panel import Panel, fit_weights, mean_or_none, one_blas_thread
from .workers import run_tasks

NULL_STREAM = 0x1D


def fit_items(panel: Panel, j: int) -> np.ndarray:
    """Items judge j's priority fit uses: read overall, with a stable verdict."""
    return np.flatnonzero(panel.present[j, :, -1] & (panel.verdict[j] != 0))


def _normalise(w: np.ndarray) -> np.ndarray:
    scale = np.mean(np.abs(w), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, w / scale, np.nan)


def _mean_correlations(w: np.ndarray) -> tuple[float | None, float | None]:
    """Mean over judge pairs of the Pearson and Spearman correlation of weight rows."""
    from scipy.stats import pearsonr, spearmanr

    pr, sr = [], []
    for u, v in itertools.combinations([r for r in w if np.all(np.isfinite(r))], 2):
        if np.std(u) > 0 and np.std(v) > 0:
            pr.append(float(pearsonr(u, v)[0]))
            sr.append(float(spearmanr(u, v)[0]))
    return mean_or_none(pr), mean_or_none(sr)


def _dispersion(norm: np.ndarray) -> np.ndarray:
    """Per judge, RMS distance of its normalised weights from the mean profile of the judges present."""
    ok = np.all(np.isfinite(norm), axis=1)
    out = np.full(len(norm), np.nan)
    if ok.sum() >= 2:
        centre = norm[ok].mean(axis=0)
        out[ok] = np.sqrt(np.mean((norm[ok] - centre) ** 2, axis=1))
    return out


def _sd(norm: np.ndarray) -> np.ndarray:
    ok = np.all(np.isfinite(norm), axis=1)
    return norm[ok].std(axis=0, ddof=1) if ok.sum() >= 2 else np.full(norm.shape[1], np.nan)


def _null_fits(x: np.ndarray, ys: np.ndarray, seed: int) -> list[np.ndarray | None]:
    """One judge's null refits: its int8 readings ``x`` against each redrawn verdict row of ``ys``
    (a worker's task)."""
    with one_blas_thread():
        xf = x.astype(float)
        out = []
        for y in ys:
            fit = fit_weights(xf, y.astype(np.int64), seed)
            out.append(None if fit is None else fit[0])
        return out


def _null_summary(w_null: np.ndarray) -> tuple[np.ndarray, np.ndarray, float | None, float | None]:
    """One repetition's cross-judge SD, dispersions and mean correlations (a worker's task)."""
    norm = _normalise(w_null)
    return (_sd(norm), _dispersion(norm), *_mean_correlations(w_null))


def identical_preference_null(panel: Panel, fits: dict[str, tuple[np.ndarray, float]], *, repeats: int = 20,
                              seed: int = 0, jobs: int | None = 1, progress: bool = False) -> dict[str, Any] | None:
    """The null of module doc for the judges in ``fits`` (judge -> (weights, intercept)); None with
    fewer than two fitted judges. The verdicts are drawn here, repetition by repetition and judge by
    judge from one generator (so they do not depend on ``jobs``); the refits, judge by judge, run
    over ``jobs`` worker processes."""
    names = [n for n in panel.judges if n in fits]
    if len(names) < 2 or repeats < 1:
        return None
    idx = [panel.judge_index(n) for n in names]
    w_obs = np.stack([fits[n][0] for n in names])
    b_obs = np.array([fits[n][1] for n in names])
    w_star, b_star = w_obs.mean(axis=0), float(b_obs.mean())
    norm_obs = _normalise(w_obs)
    obs_sd, obs_disp = _sd(norm_obs), _dispersion(norm_obs)
    obs_pr, obs_sr = _mean_correlations(w_obs)
    from scipy.special import expit

    rng = np.random.default_rng([seed, NULL_STREAM])
    data = [panel.stable[j, fit_items(panel, j), :-1] for j in idx]
    with one_blas_thread():
        probs = [expit(b_star + x.astype(float) @ w_star) for x in data]
    draws = [np.empty((repeats, len(p)), dtype=np.int8) for p in probs]
    for r in range(repeats):
        for n, p in enumerate(probs):
            draws[n][r] = np.where(rng.random(len(p)) < p, 1, -1)
    refits = run_tasks(_null_fits, [(x, d, seed) for x, d in zip(data, draws)], jobs=jobs,
                       desc="identical-preference null", progress=progress)
    null_sd = np.full((repeats, w_obs.shape[1]), np.nan)
    null_disp = np.full((repeats, len(names)), np.nan)
    null_pr, null_sr, failed = [], [], 0
    w_nulls = []
    for r in range(repeats):
        w_null = np.full_like(w_obs, np.nan)
        for n in range(len(names)):
            if refits[n][r] is None:
                failed += 1
                continue
            w_null[n] = refits[n][r]
        w_nulls.append(w_null)
    # the repetitions' cross-judge correlations (J(J-1)/2 scipy calls each) over the workers too
    summaries = run_tasks(_null_summary, [(w,) for w in w_nulls], jobs=jobs, desc="null correlations",
                          progress=progress)
    for r, (sd, disp, pr, sr) in enumerate(summaries):
        null_sd[r], null_disp[r] = sd, disp
        if pr is not None:
            null_pr.append(pr)
            null_sr.append(sr)

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b == 0 else float(a / b)

    def fin(x: float) -> float | None:
        return float(x) if np.isfinite(x) else None

    with np.errstate(all="ignore"):
        sd_mean, sd_p95 = np.nanmean(null_sd, axis=0), np.nanpercentile(null_sd, 95, axis=0)
        disp_mean, disp_p95 = np.nanmean(null_disp, axis=0), np.nanpercentile(null_disp, 95, axis=0)
    attrs = {a: {"observed_sd": fin(obs_sd[i]), "null_mean_sd": fin(sd_mean[i]), "null_p95_sd": fin(sd_p95[i]),
                 "ratio": ratio(obs_sd[i], sd_mean[i]), "exceeds_null_p95": bool(obs_sd[i] > sd_p95[i])}
             for i, a in enumerate(panel.attributes)}
    judges = {}
    for n, name in enumerate(names):
        draws = null_disp[:, n][np.isfinite(null_disp[:, n])]
        judges[name] = {"dispersion": fin(obs_disp[n]), "null_mean": fin(disp_mean[n]), "null_p95": fin(disp_p95[n]),
                        "ratio": ratio(obs_disp[n], disp_mean[n]),
                        "p_value": float((1 + np.sum(draws >= obs_disp[n])) / (1 + len(draws))) if len(draws) else None,
                        "n_null": int(len(draws))}
    ratios = [r["ratio"] for r in attrs.values() if r["ratio"] is not None]
    return {
        "repeats": int(repeats), "n_judges": len(names), "n_failed_fits": int(failed), "intercept": b_star,
        "correlation": {"pearson": {"observed": obs_pr, "null_mean": mean_or_none(null_pr),
                                    "ratio": ratio(obs_pr, mean_or_none(null_pr))},
                        "spearman": {"observed": obs_sr, "null_mean": mean_or_none(null_sr),
                                     "ratio": ratio(obs_sr, mean_or_none(null_sr))}},
        "n_attributes_exceeding": int(sum(r["exceeds_null_p95"] for r in attrs.values())),
        "n_attributes": len(attrs), "median_ratio": float(np.median(ratios)) if ratios else None,
        "attributes": attrs, "judges": judges,
    }


def _accuracy(x: np.ndarray, w: np.ndarray, b: float, y: np.ndarray) -> float:
    return float(np.mean(np.where(b + x @ w > 0, 1, -1) == y))


def default_donor(panel: Panel, fitted: list[str]) -> str:
    """The fitted judge with the highest stable rate of attribute directions (first by name on ties)."""
    def stable_rate(name: str) -> float:
        j = panel.judge_index(name)
        present = panel.present[j, :, :-1].sum()
        return panel.consistent[j, :, :-1].sum() / present if present else 0.0

    return max(sorted(fitted), key=stable_rate)


def component_swaps(panel: Panel, fits: dict[str, tuple[np.ndarray, float]], donor: str | None = None
                    ) -> dict[str, Any] | None:
    """Own, perception-swap and weight-swap accuracy of every fitted judge but the donor."""
    fitted = [n for n in panel.judges if n in fits]
    if donor is not None and donor not in panel.judges:
        raise ConfigError(f"--donor '{donor}' is not a judge of the panel ({', '.join(panel.judges)})")
    if donor is not None and donor not in fits:
        raise ConfigError(f"--donor '{donor}' has no priority fit (too few stable verdicts of both kinds)")
    if len(fitted) < 2:
        return None
    donor = donor or default_donor(panel, fitted)
    d = panel.judge_index(donor)
    w_d = fits[donor][0]
    targets: dict[str, Any] = {}
    for name in fitted:
        if name == donor:
            continue
        t = panel.judge_index(name)
        keep = fit_items(panel, t)
        x_t = panel.stable[t, keep, :-1].astype(float)
        x_d = panel.stable[d, keep, :-1].astype(float)
        y = panel.verdict[t, keep].astype(int)
        w_t, b_t = fits[name]
        targets[name] = {"n_items": int(len(keep)), "n_items_donor_read": int(panel.present[d, keep, -1].sum()),
                         "own": _accuracy(x_t, w_t, b_t, y), "perception_swap": _accuracy(x_d, w_t, b_t, y),
                         "weight_swap": _accuracy(x_t, w_d, b_t, y)}
    means = {k: mean_or_none([r[k] for r in targets.values()]) for k in ("own", "perception_swap", "weight_swap")}
    return {"donor": donor, **means,
            "perception_swap_drop": means["own"] - means["perception_swap"],
            "weight_swap_drop": means["own"] - means["weight_swap"],
            "n_targets": len(targets), "targets": targets}


def priority_fits(judges: dict[str, Any], attributes: list[str]) -> dict[str, tuple[np.ndarray, float]]:
    """judge -> (own-perception weights in attribute order, intercept) from the analysis' judges."""
    return {name: (np.array([j["weights"][a] for a in attributes], dtype=float), float(j["intercept"]))
            for name, j in judges.items() if j.get("weights")}


def priority_controls(panel: Panel, judges: dict[str, Any], *, repeats: int = 20, donor: str | None = None,
                      seed: int = 0, jobs: int | None = 1, progress: bool = False) -> dict[str, Any]:
    fits = priority_fits(judges, panel.attributes)
    out: dict[str, Any] = {}
    null = identical_preference_null(panel, fits, repeats=repeats, seed=seed, jobs=jobs, progress=progress)
    if null is not None:
        out["identical_preference_null"] = null
    swaps = component_swaps(panel, fits, donor)
    if swaps is not None:
        out["component_swaps"] = swaps
    return out


def priority_markdown(res: dict[str, Any]) -> list[str]:
    def f(x: Any) -> str:
        return num(x, missing="n/a")

    lines: list[str] = []
    null = res.get("identical_preference_null")
    meta = res.get("meta", {})
    if not meta.get("controls", True) or len(res.get("judges", {})) < 2:
        return lines
    n_fit = sum(bool(j.get("weights")) for j in res["judges"].values())
    # say why a section is absent rather than leave it out silently
    why = (f"{n_fit} of {len(res['judges'])} judges have a priority fit (a fit needs stable verdicts of both "
           "kinds); the control needs two")
    if not null:
        reason = "--null-repeats 0" if meta.get("null_repeats", 1) < 1 and n_fit >= 2 else why
        lines += ["## Identical-preference null", "", f"Not computed: {reason}.", ""]
    else:
        c = null["correlation"]
        lines += ["## Identical-preference null", "",
                  f"Every judge given the mean weights, verdicts redrawn from its own perception and refitted "
                  f"({null['repeats']} repetitions, {null['n_failed_fits']} one-class fits left out). Cross-judge "
                  f"weight correlation: Pearson {f(c['pearson']['observed'])} observed against "
                  f"{f(c['pearson']['null_mean'])} under the null (ratio {f(c['pearson']['ratio'])}); Spearman "
                  f"{f(c['spearman']['observed'])} against {f(c['spearman']['null_mean'])} (ratio "
                  f"{f(c['spearman']['ratio'])}). Cross-judge SD of normalised weights above the null 95th "
                  f"percentile on {null['n_attributes_exceeding']} of {null['n_attributes']} attributes; median "
                  f"observed / null-mean SD ratio {f(null['median_ratio'])}."
                  + (" The null's own correlation is near zero (too few items for stable fits), so the correlation "
                     "ratio says nothing here." if (c["pearson"]["null_mean"] or 0) < 0.2 else ""), ""]
        top = sorted(null["attributes"].items(), key=lambda kv: -(kv[1]["ratio"] or 0))[:15]
        lines += table(["attribute", "observed SD", "null mean SD", "null 95th pct", "ratio", "above 95th pct"],
                       [[a, f(r["observed_sd"]), f(r["null_mean_sd"]), f(r["null_p95_sd"]), f(r["ratio"]),
                         "yes" if r["exceeds_null_p95"] else "no"] for a, r in top])
        lines += ["", "Per judge: RMS distance of its normalised weights from the panel's mean profile, against "
                  "the same distance under the null.", ""]
        lines += table(["judge", "dispersion", "null mean", "null 95th pct", "ratio", "p"],
                       [[j, f(r["dispersion"]), f(r["null_mean"]), f(r["null_p95"]), f(r["ratio"]), f(r["p_value"])]
                        for j, r in null["judges"].items()]) + [""]
    sw = res.get("component_swaps")
    if not sw:
        lines += ["## Component swaps", "", f"Not computed: {why}.", ""]
    else:
        lines += ["## Component swaps", "",
                  f"Donor {sw['donor']}; in-sample accuracy on each target's own verdicts, mean over "
                  f"{sw['n_targets']} targets: own {f(sw['own'])}, perception swap {f(sw['perception_swap'])} "
                  f"(drop {f(sw['perception_swap_drop'])}), weight swap {f(sw['weight_swap'])} (drop "
                  f"{f(sw['weight_swap_drop'])}). The swaps replace objects of different size; the drops measure "
                  "sensitivity to each replacement, not causal shares.", ""]
        lines += table(["target", "items", "own", "perception swap", "weight swap"],
                       [[t, r["n_items"], f(r["own"]), f(r["perception_swap"]), f(r["weight_swap"])]
                        for t, r in sw["targets"].items()]) + [""]
    return lines
