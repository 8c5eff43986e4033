from __future__ import annotations

import json

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from rmcore.runtime.wandb_log import Tracker
from rmeval.audit.report import log_audit, write_report
from rmeval.stats.audit_sections import compute_audit
from rmeval.stats.settings import StatsSettings

KINDS = ("random", "overlap", "embedding", "length", "related")


def synthetic(n_prompts=60, k=2, seed=0, conditions=None, with_length=True):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n_prompts)
    pids = [f"p{i}" for i in range(n_prompts)]
    multi = np.arange(n_prompts) % 4 == 0
    rat, rows = [], []
    for i, p in enumerate(pids):
        for j in range(k):
            q = rng.normal()
            rid = f"{p}_r{j}"
            r = {"prompt_id": p, "response_id": rid, "helpfulness": 2 + 0.5 * u[i] + q,
                 "single_turn": bool(not multi[i])}
            if with_length:
                r["response_length"] = float(np.exp(5 + 0.3 * q))
            rat.append(r)
            s = u[i] + 0.8 * q + 0.3 * rng.normal()
            rows.append((p, rid, "original", 0, None, s))
            rows.append((p, rid, "generic", 0, None, u[i] + 0.3 * rng.normal()))
            for kind in KINDS:
                for d in range(3):
                    rows.append((p, rid, kind, d, pids[(i + 1 + d) % n_prompts], s - 0.5 + 0.3 * rng.normal()))
            for v in range(2):
                rows.append((p, rid, "paraphrase", v, None, s + 0.2 * rng.normal()))
            if multi[i]:
                rows.append((p, rid, "last_turn", 0, None, s + 0.3 * rng.normal()))
        rows.append((p, "__generic_reply__", "prompt_only", 0, None, u[i] + 0.4 * rng.normal()))
    scores = pd.DataFrame(rows, columns=["prompt_id", "response_id", "condition", "variant",
                                         "donor_prompt_id", "score"])
    if conditions is not None:
        scores = scores[scores["condition"].isin(conditions)].reset_index(drop=True)
    return scores, pd.DataFrame(rat)


def _prefs(ratings):
    rows = []
    for p, g in ratings.groupby("prompt_id"):
        a, b = g.sort_values("helpfulness", ascending=False)["response_id"].tolist()[:2]
        n = int(p[1:])
        rows.append((p, a, b, "s1" if n % 2 else "s2", "chat", n % 3, (n // 3) % 3))
    return pd.DataFrame(rows, columns=["prompt_id", "chosen_id", "rejected_id", "subset", "section",
                                       "chosen_style", "rejected_style"])


def _is_ci(r):
    return set(r) >= {"estimate", "ci95"} and len(r["ci95"]) == 2 and r["ci95"][0] <= r["ci95"][1]


@pytest.fixture(scope="module")
def full_audit():
    scores, ratings = synthetic()
    return compute_audit(scores, ratings, StatsSettings(n_boot=300, n_boot_regression=500), preferences=_prefs(ratings))


def test_full_key_structure(full_audit):
    a = full_audit
    assert set(a) == {"share", "prompt_only", "transplant", "paraphrase", "last_turn", "sibling_regression",
                      "selection", "pairwise", "meta", "share_vs_human", "share_difference", "prompt_means",
                      "sibling_regression_by_condition", "centering", "variance_explained"}
    per_response = {"last_turn", "paraphrase", *KINDS}  # shares of a response's mean over variants/donors
    assert set(a["share"]) == {"original", "single_turn", "generic", "ranks", "log_length", "human"} | per_response
    assert set(a["share_vs_human"]) == {"original", "single_turn", "generic", "generic_single_turn", "ranks",
                                        "ranks_single_turn", "log_length"} | per_response
    assert set(a["sibling_regression_by_condition"]) == {"original", "generic", "random"}
    for r in a["share"].values():
        assert _is_ci(r) and {"n_prompts", "n_dropped"} <= set(r)
    assert _is_ci(a["prompt_only"]) and "n_prompts" in a["prompt_only"]
    assert set(a["transplant"]) == set(KINDS)
    for r in a["transplant"].values():
        assert _is_ci(r["margin_sd"]) and _is_ci(r["accuracy"])
        assert r["margin_sd"]["estimate"] > 0  # planted penalty
    for c in ("paraphrase", "last_turn"):
        assert _is_ci(a[c]["abs_shift_sd"]) and _is_ci(a[c]["signed_shift_sd"])
    assert a["last_turn"]["abs_shift_sd"]["n_prompts"] == 15
    sr = a["sibling_regression"]
    for n in ("shown", "sibling", "between_slope", "within_slope"):
        assert _is_ci(sr[n])
    assert sr["shown"]["n_boot"] == 500
    sel = a["selection"]
    for n in ("top30_raw", "top30_centered", "delta"):
        assert _is_ci(sel[n])
    assert {"raw_vs_raw", "centered_vs_centered"} <= set(sel["spearman"])
    pw = a["pairwise"]
    assert _is_ci(pw["accuracy"]) and set(pw["by_subset"]) == {"s1", "s2"} and "chat" in pw["by_section"]
    assert np.array(pw["rmbench"]["matrix"]).shape == (3, 3)
    meta = a["meta"]
    assert meta["n_prompts"] == 60 and meta["n_responses"] == 120 and meta["n_boot"] == 300
    assert meta["seed"] == 0 and "original" in meta["conditions"]
    json.dumps(a)  # plain JSON types


def test_absent_conditions_are_absent():
    scores, ratings = synthetic(conditions={"original", "random"}, with_length=False)
    a = compute_audit(scores, ratings, StatsSettings(n_boot=100, n_boot_regression=100))
    assert set(a["share"]) == {"original", "single_turn", "ranks", "human", "random"}
    assert set(a["transplant"]) == {"random"}
    assert set(a["share_vs_human"]) == {"original", "single_turn", "ranks", "ranks_single_turn", "random"}
    assert "share_difference" not in a and "generic_vs_original" not in a["prompt_means"]
    for absent in ("prompt_only", "paraphrase", "last_turn", "pairwise"):
        assert absent not in a
    assert a["meta"]["conditions"] == ["original", "random"]


def test_audit_is_seeded():
    scores, ratings = synthetic(n_prompts=30, conditions={"original", "generic"})
    a1 = compute_audit(scores, ratings, StatsSettings(n_boot=100, n_boot_regression=100, seed=3))
    a2 = compute_audit(scores, ratings, StatsSettings(n_boot=100, n_boot_regression=100, seed=3))
    assert a1["share"] == a2["share"]


def test_write_report_and_log(full_audit, tmp_path, monkeypatch):
    paths = write_report(full_audit, tmp_path / "out", title="test audit")
    assert set(paths) == {"json", "markdown", "shares", "transplant", "variance_explained"}
    loaded = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert loaded["share"]["original"]["estimate"] == pytest.approx(full_audit["share"]["original"]["estimate"])
    md = (tmp_path / "out" / "audit.md").read_text()
    for heading in ("# test audit", "variance share", "transplant", "Sibling-rating", "RM-Bench"):
        assert heading.lower() in md.lower()
    for key in ("shares", "transplant"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(paths[key])
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100

    log_audit(Tracker(mode="disabled"), full_audit, paths)

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tracker = Tracker(mode="offline", dir=tmp_path / "wandb", name="audit-test")
    try:
        log_audit(tracker, full_audit, paths, step=0)
        run_dir = tracker.run_dir
    finally:
        tracker.finish()
    assert run_dir is not None and run_dir.exists()
    assert list((tmp_path / "wandb").rglob("*.wandb"))


def _interval(x):
    return {"estimate": x, "ci95": [x - 0.05, x + 0.07]}


def _crowded_audit():
    """Twelve shares beside the human's and every kind of adjustment, with long labels."""
    names = [f"{c}: {t}" for c in ("original", "generic", "last turn") for t in
             ("raw", "length-residualised", "rating-residualised", "pool-centred")]
    removed = {"between_removed": _interval(0.2)}
    return {"share_vs_human": {n: {"model": _interval(0.1 + 0.05 * i), "human": _interval(0.3)}
                               for i, n in enumerate(names)},
            "transplant": {k: {"margin_sd": _interval(0.5)} for k in KINDS},
            "variance_explained": {
                "rating_residuals": {n: removed for n in ("log_length", "all_ratings", "helpfulness_correctness")},
                "response_probes": {n: removed for n in ("ridge", "kernel_ridge", "boosted_trees", "mlp")},
                "prompt_probe": {n: removed for n in ("length_turns", "embedding", "hidden_state")}}}


def test_interval_figures_are_sized_to_their_labels_and_keep_them_inside(tmp_path, monkeypatch):
    """Everything drawn (tick labels, axis labels, title, legend) lies inside the canvas: the
    figure's tight bounding box, what ``bbox_inches="tight"`` would crop to, is within the figure
    and at least 0.04 inches clear of each edge; and the PNG is a readable size whatever the number
    of labels: width/height within [0.6, 2.6] and each side 300-1600 px (shares.png with 12 rows
    was 1749 x 418 px, its labels spread along x)."""
    from PIL import Image

    import rmeval.audit.report as report

    outside: dict[str, list[float]] = {}
    save = report.atomic_save_figure

    def checked_save(fig, path, **kw):
        fig.canvas.draw()
        tight, canvas = fig.get_tightbbox(fig.canvas.get_renderer()), fig.bbox_inches  # inches
        # how far the drawn content reaches past (positive) or stays inside (negative) each edge
        over = [canvas.x0 - tight.x0, tight.x1 - canvas.x1, canvas.y0 - tight.y0, tight.y1 - canvas.y1]
        outside[path.name] = [round(o, 3) for o in over if o > -0.04]
        return save(fig, path, **kw)

    monkeypatch.setattr(report, "atomic_save_figure", checked_save)
    audit = _crowded_audit()
    paths = report._plots(audit, tmp_path)
    assert set(paths) == {"shares", "transplant", "variance_explained"}
    assert outside == {"shares.png": [], "transplant.png": [], "variance_explained.png": []}
    for path in paths.values():
        width, height = Image.open(path).size
        assert 0.6 <= width / height <= 2.6 and 300 <= min(width, height) and max(width, height) <= 1600, (
            path.name, width, height)
