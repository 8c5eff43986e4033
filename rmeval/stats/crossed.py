"""The crossed decomposition of transplant scores: how much of a score follows the response, how
much the prompt attached to it, and how much the MATCH between the two (the study's appendix,
"Feature probes and variance decomposition").

Every audited response r is scored under its own prompt, under its random donors and (when
scored) under the generic prompt. With c the prompt a row was scored under (a prompt id, or the
generic prompt as one more level) and own = 1 on the own-prompt row::

    score_{r,c} = alpha_r + beta_c + gamma * own_{r,c} + e_{r,c}

fitted by ordinary least squares with a fixed effect per response and per prompt level (the
generic level, else the first, is the reference). A prompt is a wrong prompt for other responses
and the own prompt for its own, which is what identifies gamma apart from beta. The response
effects are absorbed by demeaning within each response (exact: the within estimator), leaving
a sparse system over the prompt levels and gamma.

Reported, in SDs of the original scores: ``match`` = gamma; ``sd_response`` = the SD of the
fitted alpha over responses; ``sd_donor`` = the SD of the fitted beta over the donor rows (which
wrong prompt is attached to a response); ``generic_minus_donor`` = beta of the generic prompt
minus the mean donor beta; and the ratios ``match_over_response`` and ``donor_over_response``
(the study: the match is 4 to 18 times the response effect, the donor effect about as large as
the response effect). SDs of fitted effects include their estimation noise (a few rows per
response), as a plain fixed-effects fit reports them.

Interval: the model is REFITTED in every prompt resample. A resampled prompt carries its
multiplicity as a weight on the rows of its responses; since all rows of a response share one
weight, the within-response demeaning is the same in every resample and only the weighted normal
equations change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.linalg import spsolve

from .bootstrap import summarize

GENERIC_LEVEL = "__generic_prompt__"
STATS = ("match", "sd_response", "sd_donor", "generic_minus_donor", "match_over_response", "donor_over_response")


def crossed_rows(original: pd.DataFrame, donors: pd.DataFrame, generic: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long table of the fit: prompt_id (the response's own), response, level (the prompt scored
    under), own, score. Only responses with donor rows enter."""
    key = ["prompt_id", "response_id"]
    o = original[key + ["score"]].assign(level=original["prompt_id"].astype(str), own=1)
    d = donors[key + ["score"]].assign(level=donors["donor_prompt_id"].astype(str), own=0)
    parts = [o, d]
    if generic is not None:
        parts.append(generic[key + ["score"]].assign(level=GENERIC_LEVEL, own=0))
    rows = pd.concat(parts, ignore_index=True)
    for c in key:
        rows[c] = rows[c].astype(str)
    audited = d[key].astype(str).drop_duplicates()
    rows = rows.merge(audited, on=key)
    rows["response"] = rows["prompt_id"] + "\x1f" + rows["response_id"]
    return rows[["prompt_id", "response", "level", "own", "score"]]


class CrossedFit:
    """The within-response design of :func:`crossed_rows`, fitted under any prompt weights."""

    def __init__(self, rows: pd.DataFrame, prompts: np.ndarray) -> None:
        self.resp_codes, self.responses = pd.factorize(rows["response"])
        levels = pd.Index(pd.unique(rows["level"]))
        self.ref = GENERIC_LEVEL if GENERIC_LEVEL in levels else levels[0]
        self.levels = levels.drop(self.ref)  # parameters: one beta per non-reference level, then gamma
        self.level_codes = self.levels.get_indexer(rows["level"])  # -1: the reference level
        self.own = rows["own"].to_numpy(float)
        self.y = rows["score"].to_numpy(float)
        self.prompt_codes = pd.Index(prompts).get_indexer(rows["prompt_id"])
        if (self.prompt_codes < 0).any():
            raise ValueError("a transplanted response's prompt has no original scores")
        n, m, nr = len(rows), len(self.levels), len(self.responses)
        on = self.level_codes >= 0
        z = sparse.csr_matrix((np.ones(on.sum()), (np.flatnonzero(on), self.level_codes[on])), shape=(n, m + 1))
        z = (z + sparse.csr_matrix((self.own, (np.arange(n), np.full(n, m))), shape=(n, m + 1))).tocsr()
        a = sparse.csr_matrix((np.ones(n), (np.arange(n), self.resp_codes)), shape=(n, nr))
        size = np.asarray(a.sum(axis=0)).ravel()
        means = sparse.diags(1.0 / size) @ (a.T @ z)  # per-response means of every column
        self.z = z
        self.zt = (z - a @ means).tocsr()  # within-response demeaned design
        self.yt = self.y - (a @ (a.T @ self.y / size))
        self.size = size
        self.resp_prompt = np.zeros(nr, dtype=np.int64)
        self.resp_prompt[self.resp_codes] = self.prompt_codes
        self.m = m
        self.donor = (self.own == 0) & (rows["level"].to_numpy() != GENERIC_LEVEL)
        g = (self.zt.T @ self.zt).tocsc()
        g = g + sparse.identity(m + 1, format="csc") * (1e-10 * max(abs(g.diagonal()).max(), 1.0))
        self._start = np.atleast_1d(spsolve(g, self.zt.T @ self.yt))  # the full-sample fit: CG's start

    def solve(self, prompt_weights: np.ndarray, *, tol: float = 1e-10, max_iter: int = 1000) -> np.ndarray:
        """(m + 1, B) parameters [beta over the non-reference levels, gamma] under each column of
        ``prompt_weights`` (k, B): the weighted normal equations, solved for all resamples at once
        by Jacobi-preconditioned conjugate gradients from the full-sample solution. A level that
        a resample never uses has an empty row; it stays at zero (its preconditioner is zero)."""
        w = prompt_weights[self.prompt_codes]  # (rows, B)
        zt = self.zt
        rhs = zt.T @ (w * self.yt[:, None])
        diag = (zt.multiply(zt)).T @ w
        inv = np.divide(1.0, diag, out=np.zeros_like(diag), where=diag > 1e-12 * diag.max(axis=0, keepdims=True))

        def apply(v: np.ndarray) -> np.ndarray:
            return zt.T @ (w * (zt @ v))

        x = np.repeat(self._start[:, None], w.shape[1], axis=1) * (inv > 0)
        r = rhs - apply(x)
        zr = inv * r
        p = zr.copy()
        rz = np.sum(r * zr, axis=0)
        norm = np.sqrt(np.sum(rhs * rhs, axis=0)) + 1e-300
        for _ in range(max_iter):
            if np.all(np.sqrt(np.sum(r * r, axis=0)) <= tol * norm):
                break
            ap = apply(p)
            with np.errstate(divide="ignore", invalid="ignore"):
                a = np.where(rz > 0, rz / np.sum(p * ap, axis=0), 0.0)
            x += a * p
            r -= a * ap
            zr = inv * r
            rz_new = np.sum(r * zr, axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                p = zr + np.where(rz > 0, rz_new / rz, 0.0) * p
            rz = rz_new
        bad = np.sqrt(np.sum(r * r, axis=0)) > 1e-6 * norm
        for j in np.flatnonzero(bad):  # a resample CG did not settle: solve it directly
            g = (zt.T @ sparse.diags(w[:, j]) @ zt).tocsc()
            g = g + sparse.identity(self.m + 1, format="csc") * (1e-10 * max(abs(g.diagonal()).max(), 1.0))
            x[:, j] = spsolve(g, rhs[:, j])
        return x

    def effects(self, theta: np.ndarray, prompt_weights: np.ndarray) -> dict[str, float]:
        """The reported effects (score units) of one parameter vector under its prompt weights."""
        w = prompt_weights[self.prompt_codes]
        beta = np.concatenate([theta[:self.m], [0.0]])  # index -1: the reference level
        gamma = float(theta[self.m])
        fitted_prompt = beta[self.level_codes] + gamma * self.own
        alpha = np.bincount(self.resp_codes, weights=self.y - fitted_prompt) / self.size
        out = {"match": gamma, "sd_response": _wsd(alpha, prompt_weights[self.resp_prompt])}
        bd, wd = beta[self.level_codes][self.donor], w[self.donor]
        out["sd_donor"] = _wsd(bd, wd)
        if self.ref == GENERIC_LEVEL:
            out["generic_minus_donor"] = 0.0 - float(np.sum(wd * bd) / np.sum(wd))
        return out

    def fit(self, prompt_weights: np.ndarray) -> dict[str, float]:
        """Effects (in score units) under one set of prompt weights (ones: the plain OLS fit)."""
        return self.effects(self.solve(prompt_weights[:, None])[:, 0], prompt_weights)


def _wsd(x: np.ndarray, w: np.ndarray) -> float:
    """Weighted SD (population form) of x."""
    tot = w.sum()
    if tot <= 0:
        return float("nan")
    mu = np.sum(w * x) / tot
    return float(np.sqrt(np.sum(w * (x - mu) ** 2) / tot))


def crossed_decomposition(original: pd.DataFrame, donors: pd.DataFrame, generic: pd.DataFrame | None,
                          weights: np.ndarray, prompts: np.ndarray) -> dict[str, Any]:
    """The section (module doc). ``weights``: (B, k) multiplicities of ``prompts`` (the prompts of
    ``original``); the SD unit is the original scores' SD under the same weights."""
    rows = crossed_rows(original, donors, generic)
    if rows["response"].nunique() < 3:
        return {}
    fit = CrossedFit(rows, prompts)
    pc = pd.Index(prompts).get_indexer(original["prompt_id"].astype(str))
    so = original["score"].to_numpy(float)

    def scaled(w: np.ndarray, theta: np.ndarray | None = None) -> dict[str, float]:
        r = fit.fit(w) if theta is None else fit.effects(theta, w)
        wo = w[pc]
        mu = np.sum(wo * so) / wo.sum()
        sd = np.sqrt(np.sum(wo * (so - mu) ** 2) / (wo.sum() - 1))  # the transplant margin's unit
        out = {k: v / sd for k, v in r.items()}
        with np.errstate(divide="ignore", invalid="ignore"):
            out["match_over_response"] = r["match"] / r["sd_response"]
            out["donor_over_response"] = r["sd_donor"] / r["sd_response"]
        return out

    est = scaled(np.ones(len(prompts)))
    boot = []
    for i in range(0, len(weights), 256):  # resamples solved together, in bounded memory
        chunk = weights[i:i + 256]
        theta = fit.solve(chunk.T)
        boot += [scaled(w, th) for w, th in zip(chunk, theta.T)]
    k = int(len(np.unique(fit.prompt_codes)))
    res: dict[str, Any] = {name: summarize(est[name], np.array([b[name] for b in boot]), k, len(boot))
                           for name in STATS if name in est}
    res.update(n_responses=int(len(fit.responses)), n_rows=int(len(fit.y)), n_levels=int(fit.m + 1),
               generic=bool(fit.ref == GENERIC_LEVEL))
    return res
