"""End to end: `rmeval audit` on a saved MiniLM reward model with all ten conditions, `rmeval stats`
on the tables it wrote and on a small hand-made table, checkpoint comparison, and SPEC parsing.
The audit's shares and transplant figures -- the first run's, the resumed run's and those `rmeval
stats` recomputes from the written tables -- are each checked against references computed here from
the scores table: the ANOVA ICC(1) by hand, OLS residuals by numpy, the AUC by scikit-learn, and
every interval as the percentile interval of the same figure on explicitly duplicated prompt
resamples."""

from __future__ import annotations

import io
import json
import logging

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score

from rmcore.data.loading import load_rating_set, parse_data_spec
from rmcore.runtime.checkpoints import find_checkpoints
from rmeval.cli import main
from rmeval.stats.audit_sections import streams
from tests.support import hand_icc

SPEC = "simulated:n_prompts=30,responses_per_prompt=3,seed=1"


def _rewrite_file(path, rs, kind):
    rows = []
    for i, p in enumerate(rs.prompts):
        for v in range(1 + i % 2):  # 1 or 2 variants per prompt
            rows.append({"prompt_id": p.prompt_id, "variant": v, "text": f"{kind} {v}: {p.last_user_text} again"})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return len(rows)


def test_parse_data_spec(tmp_path):
    assert parse_data_spec("simulated") == {"name": "simulated"}
    assert parse_data_spec("simulated:n_prompts=100,seed=3") == {"name": "simulated", "n_prompts": 100, "seed": 3}
    assert parse_data_spec("rm_bench:/d/chat_filtered.json") == {"name": "rm_bench", "path": "/d/chat_filtered.json"}
    assert parse_data_spec("helpsteer2:validation") == {"name": "helpsteer2", "split": "validation"}
    assert parse_data_spec('{"name": "simulated", "n_prompts": 5}') == {"name": "simulated", "n_prompts": 5}
    f = tmp_path / "spec.yaml"
    f.write_text("name: simulated\nn_prompts: 7\n")
    assert parse_data_spec(str(f)) == {"name": "simulated", "n_prompts": 7}


N_BOOT = 100  # the audits' resamples
_STREAMS = streams()  # the audit sections' random streams


def _hand_interval(groups, stat, stream):
    """Percentile 95% interval of ``stat(rows, labels)`` over the audit's prompt resamples: N_BOOT
    draws of k prompts with replacement from the seeded stream (``numpy.random.default_rng([seed 0,
    stream])``, prompts in order of first appearance), each drawn prompt entering as its own prompt
    (a prompt drawn twice is two prompts); ``rows`` index the table behind ``groups``."""
    codes, prompts = pd.factorize(pd.Series(groups))
    rows_of = [np.flatnonzero(codes == j) for j in range(len(prompts))]
    draws = np.random.default_rng([0, _STREAMS[stream]]).integers(0, len(prompts), size=(N_BOOT, len(prompts)))
    vals = []
    for draw in draws:
        rows = np.concatenate([rows_of[j] for j in draw])
        labels = np.repeat(np.arange(len(draw)), [len(rows_of[j]) for j in draw])
        vals.append(stat(rows, labels))
    vals = np.asarray(vals, dtype=float)
    return list(np.percentile(vals[np.isfinite(vals)], [2.5, 97.5]))


def _ols_residual(y, x):
    design = np.column_stack([np.ones_like(x), x])
    return y - design @ np.linalg.lstsq(design, y, rcond=None)[0]


def _hand_shares(scores, ratings):
    """{share key: (estimate, ci95, n_prompts)} of every share the audit reports on these tables."""
    by = {c: g.reset_index(drop=True) for c, g in scores.groupby("condition", sort=False)}
    orig = by["original"].merge(ratings, on=["prompt_id", "response_id"], how="left")
    icc = lambda v: lambda rows, labels: hand_icc(v[rows], labels)  # noqa: E731
    cases = {"original": (orig["score"].to_numpy(), orig["prompt_id"]),
             "generic": (by["generic"]["score"].to_numpy(), by["generic"]["prompt_id"]),
             "ranks": (rankdata(orig["score"]), orig["prompt_id"]),  # ranked once on the full sample
             "human": (orig["helpfulness"].to_numpy(float), orig["prompt_id"])}
    st = orig[orig["single_turn"].astype(bool)]
    cases["single_turn"] = (st["score"].to_numpy(), st["prompt_id"])
    for cond in ("last_turn", "paraphrase", "random", "overlap", "embedding", "length", "related"):
        per = by[cond].groupby(["prompt_id", "response_id"], sort=False)["score"].mean().reset_index()
        cases[cond] = (per["score"].to_numpy(), per["prompt_id"])
    out = {}
    for name, (v, g) in cases.items():
        g = g.to_numpy()
        out[name] = (hand_icc(v, g), _hand_interval(g, icc(v), f"share.{name}"), len(set(g)))
    # log length: the OLS residual on log response length, refitted in every resample
    y, x, g = orig["score"].to_numpy(), np.log(orig["response_length"].to_numpy(float)), orig["prompt_id"].to_numpy()
    out["log_length"] = (hand_icc(_ols_residual(y, x), g),
                         _hand_interval(g, lambda r, lab: hand_icc(_ols_residual(y[r], x[r]), lab), "share.log_length"),
                         len(set(g)))
    return out


def _hand_transplant(scores, kind):
    """{figure: (estimate, ci95)} of one transplant kind, and (n_responses, n_donors_mean, n_prompts)."""
    o = scores[scores["condition"] == "original"].reset_index(drop=True)
    w = scores[scores["condition"] == kind].merge(o[["prompt_id", "response_id", "score"]],
                                                   on=["prompt_id", "response_id"], suffixes=("", "_own"))
    per = w.groupby(["prompt_id", "response_id"]).agg(own=("score_own", "first"), mean=("score", "mean"),
                                                       top=("score", "max"), size=("score", "size")).reset_index()
    prompts = pd.unique(o["prompt_id"])
    # per prompt: its original scores (the SD's rows), its responses' margins and hits, its
    # positives (the transplanted responses' own scores), its negatives and (own, donor) pairs
    parts = {p: (o.loc[o["prompt_id"] == p, "score"].to_numpy(),
                 (per.loc[per["prompt_id"] == p, "own"] - per.loc[per["prompt_id"] == p, "mean"]).to_numpy(),
                 (per.loc[per["prompt_id"] == p, "own"] > per.loc[per["prompt_id"] == p, "top"]).to_numpy(float),
                 per.loc[per["prompt_id"] == p, "own"].to_numpy(),
                 w.loc[w["prompt_id"] == p, "score"].to_numpy(), w.loc[w["prompt_id"] == p, "score_own"].to_numpy())
             for p in prompts}

    def figures(drawn):
        sd_rows, d, hit, pos, neg, own = (np.concatenate(c) for c in zip(*(parts[p] for p in drawn)))
        return {"margin_sd": d.mean() / np.std(sd_rows, ddof=1), "accuracy": hit.mean(),
                "auc_paired": np.mean((own > neg) + 0.5 * (own == neg)),
                "auc": np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))}

    est = figures(prompts)
    o_all = np.concatenate([parts[p][3] for p in prompts])
    n_all = np.concatenate([parts[p][4] for p in prompts])
    assert est["auc"] == pytest.approx(roc_auc_score(np.r_[np.ones(len(o_all)), np.zeros(len(n_all))],
                                                     np.r_[o_all, n_all]), abs=1e-12)  # the definition is sklearn's
    draws = np.random.default_rng([0, _STREAMS[f"transplant.{kind}"]]).integers(0, len(prompts),
                                                                                 size=(N_BOOT, len(prompts)))
    boots = [figures(prompts[d]) for d in draws]
    out = {n: (est[n], list(np.percentile([b[n] for b in boots], [2.5, 97.5]))) for n in est}
    return out, (len(per), float(per["size"].mean()), w["prompt_id"].nunique())


def _check_against_hand(audit, shares, transplants):
    for name, (est, ci, k) in shares.items():
        got = audit["share"][name]
        assert got["estimate"] == pytest.approx(est, abs=1e-10), name
        assert got["ci95"] == pytest.approx(ci, abs=1e-9), name
        assert (got["n_prompts"], got["n_boot"], got["n_dropped"]) == (k, N_BOOT, 0), name
    assert set(audit["share"]) == set(shares)
    assert set(audit["transplant"]) == set(transplants)
    for kind, (figs, (n_resp, n_donors, k)) in transplants.items():
        got = audit["transplant"][kind]
        for n, (est, ci) in figs.items():
            assert got[n]["estimate"] == pytest.approx(est, abs=1e-10), (kind, n)
            assert got[n]["ci95"] == pytest.approx(ci, abs=1e-9), (kind, n)
            assert (got[n]["n_prompts"], got[n]["n_boot"]) == (k, N_BOOT), (kind, n)
        assert (got["n_responses"], got["n_donors_mean"]) == (n_resp, pytest.approx(n_donors)), kind


@pytest.mark.heavy  # ~40 s: every condition end to end, resumed, recomputed by stats
@pytest.mark.slow
def test_audit_all_ten_conditions_then_stats(tmp_path, minilm_ckpt):
    rs = load_rating_set(parse_data_spec(SPEC))
    n_rel = _rewrite_file(tmp_path / "related.jsonl", rs, "related")
    n_par = _rewrite_file(tmp_path / "para.jsonl", rs, "paraphrase")
    out = tmp_path / "audit"
    rc = main(["audit", "--checkpoint", str(minilm_ckpt), "--data", SPEC, "--out", str(out),
               "--related-file", str(tmp_path / "related.jsonl"), "--paraphrase-file", str(tmp_path / "para.jsonl"),
               "--max-length", "128", "--n-boot", "100", "--wandb-mode", "disabled"])
    assert rc == 0
    audit = json.loads((out / "audit.json").read_text())
    assert sorted(audit["meta"]["conditions"]) == sorted(
        ["original", "generic", "prompt_only", "random", "overlap", "embedding", "length", "related",
         "paraphrase", "last_turn", "fixed_reply_random", "fixed_reply_related"])
    for key in ("share", "prompt_only", "transplant", "paraphrase", "last_turn", "sibling_regression",
                "selection", "pairwise", "truncation"):
        assert key in audit, key
    assert set(audit["transplant"]) == {"random", "overlap", "embedding", "length", "related"}
    assert set(audit["fixed_reply"]) == {"random", "related"}
    assert (out / "audit.md").read_text().strip()
    assert (out / "shares.png").stat().st_size > 0 and (out / "transplant.png").stat().st_size > 0

    # row count worked out by hand: 90 responses, 30 prompts, the multi-turn prompts x 3 responses
    scores = pd.read_parquet(out / "scores.parquet")
    n_resp, n_prompts, n_multi = 90, 30, sum(not p.single_turn for p in rs.prompts)
    assert n_multi > 0
    expected = {"original": n_resp, "generic": n_resp, "prompt_only": n_prompts, "random": 4 * n_resp,
                "overlap": 4 * n_resp, "embedding": 4 * n_resp, "length": 4 * n_resp, "related": 3 * n_rel,
                "paraphrase": 3 * n_par, "last_turn": 3 * n_multi,
                "fixed_reply_random": 4 * n_prompts, "fixed_reply_related": n_rel}
    assert scores.groupby("condition").size().to_dict() == expected
    assert audit["truncation"]["total"]["n"] == sum(expected.values())
    tr = scores[scores.condition.isin(["random", "overlap", "embedding", "length"])]
    assert (tr.donor_prompt_id != tr.prompt_id).all() and tr.donor_prompt_id.notna().all()
    assert np.isfinite(scores.score).all()

    # the shares and transplant figures against references computed here from the written tables
    ratings = pd.read_parquet(out / "ratings.parquet")
    shares = _hand_shares(scores, ratings)
    transplants = {k: _hand_transplant(scores, k) for k in ("random", "overlap", "embedding", "length", "related")}
    _check_against_hand(audit, shares, transplants)
    assert audit["share"]["log_length"]["n_zero_length"] == int((ratings["response_length"] == 0).sum())

    # second run: resumes from scores.parquet + cache and gives the same scores, and the same figures
    rc = main(["audit", "--checkpoint", str(minilm_ckpt), "--data", SPEC, "--out", str(out),
               "--related-file", str(tmp_path / "related.jsonl"), "--paraphrase-file", str(tmp_path / "para.jsonl"),
               "--max-length", "128", "--n-boot", "100", "--wandb-mode", "disabled"])
    again = json.loads((out / "audit.json").read_text())
    assert again["truncation"]["total"]["n_resumed"] == sum(expected.values())
    pd.testing.assert_frame_equal(pd.read_parquet(out / "scores.parquet"), scores)
    _check_against_hand(again, shares, transplants)

    # stats recomputes the audit from the written tables, without a model: the same references
    st = tmp_path / "stats"
    assert main(["stats", "--scores", str(out / "scores.parquet"), "--ratings", str(out / "ratings.parquet"),
                 "--preferences", str(out / "preferences.parquet"), "--out", str(st), "--n-boot", "100",
                 "--wandb-mode", "disabled"]) == 0
    recomputed = json.loads((st / "audit.json").read_text())
    assert audit["transplant"]["related"]["variants"]["n_texts"] == n_rel  # the related file, as the audit read it
    _check_against_hand(recomputed, shares, transplants)


def test_stats_on_small_hand_table(tmp_path):
    rng = np.random.default_rng(0)
    ratings, scores = [], []
    for p in range(8):
        for r in range(3):
            ratings.append({"prompt_id": f"q{p}", "response_id": f"q{p}:{r}", "helpfulness": float(r + p % 2),
                            "single_turn": True, "response_length": 10 + r})
            for cond in ("original", "generic"):
                scores.append({"prompt_id": f"q{p}", "response_id": f"q{p}:{r}", "condition": cond, "variant": 0,
                               "donor_prompt_id": None, "score": float(r + (p if cond == "original" else 0))
                               + rng.normal(0, 0.1)})
    pd.DataFrame(ratings).to_json(tmp_path / "ratings.jsonl", orient="records", lines=True)
    pd.DataFrame(scores).to_parquet(tmp_path / "scores.parquet")
    out = tmp_path / "out"
    assert main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings", str(tmp_path / "ratings.jsonl"),
                 "--out", str(out), "--n-boot", "50", "--wandb-mode", "disabled"]) == 0
    audit = json.loads((out / "audit.json").read_text())
    assert audit["meta"]["n_prompts"] == 8 and audit["meta"]["n_responses"] == 24
    assert set(audit["meta"]["conditions"]) == {"original", "generic"}
    assert "transplant" not in audit  # not scored -> absent, not zero
    # original scores carry a prompt offset of 0..7 over a within-prompt spread of 0..2; generic none,
    # so the between-prompt share must be far higher under the original prompts
    assert audit["share"]["original"]["estimate"] > 0.8 > 0.2 > audit["share"]["generic"]["estimate"]
    assert (out / "audit.md").exists()


def test_several_checkpoints_summary(tmp_path, minilm_ckpt):
    import shutil

    root = tmp_path / "run"
    for name in ("checkpoint-10", "checkpoint-2"):
        shutil.copytree(minilm_ckpt, root / name)
    assert [n for n, _ in find_checkpoints(root)] == ["checkpoint-2", "checkpoint-10"]
    out = tmp_path / "cmp"
    assert main(["audit", "--checkpoint", str(root), "--data", "simulated:n_prompts=12,responses_per_prompt=2",
                 "--out", str(out), "--conditions", "original", "generic", "--max-length", "64", "--n-boot", "50",
                 "--wandb-mode", "disabled"]) == 0
    for name in ("checkpoint-2", "checkpoint-10"):
        assert (out / name / "audit.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["checkpoint-2", "checkpoint-10"]
    # identical weights -> identical figures
    assert summary["checkpoint-2"]["share/original/estimate"] == summary["checkpoint-10"]["share/original/estimate"]
    assert "share/original/estimate" in (out / "summary.md").read_text()


def test_bad_condition_is_a_clean_error(tmp_path, minilm_ckpt, capsys):
    rc = main(["audit", "--checkpoint", str(minilm_ckpt), "--data", "simulated:n_prompts=6", "--out",
               str(tmp_path), "--conditions", "related", "--wandb-mode", "disabled"])
    assert rc == 2 and "needs --related-file" in capsys.readouterr().err


def test_audit_run_carries_arm_and_seed_to_wandb(tmp_path, minilm_ckpt, monkeypatch):
    """An audit of a checkpoint trained by rmtrain is tagged with its arm and seed and grouped with
    its sweep, so arms can be compared on W&B."""
    import shutil

    from tests.support import read_run

    ckpt = tmp_path / "bt"
    shutil.copytree(minilm_ckpt, ckpt)
    (ckpt / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 3, "model": "m"}))
    (ckpt / "matchrm_config.json").write_text(json.dumps({"wandb": {"group": "demo-sweep"}}))
    out = tmp_path / "audit"
    assert main(["audit", "--checkpoint", str(ckpt), "--data", "simulated:n_prompts=8,responses_per_prompt=2",
                 "--out", str(out), "--conditions", "original", "--max-length", "64", "--n-boot", "20",
                 "--wandb-mode", "offline"]) == 0
    run = read_run(out / "wandb")
    assert set(run["tags"]) == {"arm:bt_margin", "seed:3"}
    assert run["config"]["arm"] == "bt_margin" and run["config"]["seed"] == 3
    audit = json.loads((out / "audit.json").read_text())
    assert audit["meta"]["arm"] == "bt_margin" and audit["meta"]["group"] == "demo-sweep"
    assert audit["meta"]["run_seed"] == 3 and audit["meta"]["seed"] == 0  # the audit's own seed kept
    logged = [h for h in run["history"] if any("share" in k for k in h)]
    assert logged and any(v == pytest.approx(audit["share"]["original"]["estimate"])
                          for h in logged for k, v in h.items() if "share" in k and "original" in k
                          and k.endswith("estimate"))


def test_stats_picks_up_preferences_beside_the_scores(tmp_path, capsys):
    ratings = pd.DataFrame({"prompt_id": list("aabbccdd"), "response_id": list("12345678"),
                            "helpfulness": [1.0, 2, 3, 4, 2, 5, 1, 1]})
    scores = ratings.assign(condition="original", score=[0.1, 0.9, 0.5, 0.2, 0.3, 0.8, 0.4, 0.6])
    prefs = pd.DataFrame({"prompt_id": list("abcd"), "chosen_id": list("2458"), "rejected_id": list("1367")})
    scores.drop(columns="helpfulness").to_parquet(tmp_path / "scores.parquet")
    ratings.to_parquet(tmp_path / "ratings.parquet")
    prefs.to_parquet(tmp_path / "preferences.parquet")
    rc = main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings",
               str(tmp_path / "ratings.parquet"), "--out", str(tmp_path / "o"), "--n-boot", "20",
               "--n-boot-regression", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    audit = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert audit["pairwise"]["accuracy"]["estimate"] == pytest.approx(2 / 4)  # a, c right; b, d wrong
    assert "preferences.parquet" in capsys.readouterr().err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.usefixtures("one_torch_thread")
def test_audit_named_by_arm_and_seed_with_progress(tmp_path, demo_ckpt, monkeypatch):
    fake = _Tty()
    monkeypatch.setattr("sys.stderr", fake)
    out = tmp_path / "a"
    rc = main(["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=8,seed=1",
               "--out", str(out), "--conditions", "original", "generic", "random", "--max-length", "32",
               "--n-boot", "20", "--n-boot-regression", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    assert (out / "audit.md").read_text().splitlines()[0] == "# Audit of bt_margin seed 1"
    audit = json.loads((out / "audit.json").read_text())
    assert audit["donor_exclusions"] == {"n_pairs": 0, "n_prompts": 0}  # simulated prompts are all distinct
    bars = fake.getvalue()  # one bar over every text, the condition beside it
    assert "scoring bt_margin seed 1" in bars and "condition=original" in bars and "condition=generic" in bars
    fake.seek(0)
    fake.truncate()
    rc = main(["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=8,seed=1",
               "--out", str(tmp_path / "b"), "--conditions", "original", "--max-length", "32", "--n-boot",
               "20", "--n-boot-regression", "20", "--wandb-mode", "disabled", "--no-progress"])
    assert rc == 0 and "original" not in fake.getvalue()


@pytest.mark.usefixtures("one_torch_thread")
def test_audit_rerun_prints_the_same_line_and_progress_to_a_log(tmp_path, demo_ckpt, monkeypatch, capsys, caplog):
    """stderr not a terminal (a log file): the scoring and the statistics still say where they are.
    A finished audit rerun into the same --out scores nothing and prints the same line, its cut
    counts kept, titled by arm and seed as the report is; meta.seconds covers the whole run. An
    audit interrupted before its scores table was written resumes from the score cache, and says so."""
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    out = tmp_path / "a"
    argv = ["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=6,seed=1", "--out", str(out),
            "--conditions", "original", "generic", "--max-length", "24", "--n-boot", "20", "--n-boot-regression",
            "20", "--wandb-mode", "disabled"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    lines = log.getvalue().splitlines()
    assert any(ln.startswith("scoring bt_margin seed 1: 48 of 48 texts (100%), ") for ln in lines)
    assert any(ln.startswith("statistics bt_margin seed 1: done in ") for ln in lines)
    assert (first.startswith("bt_margin seed 1: 48 scores of at most 24 tokens (")
            and " texts had their prompt cut; " in first)
    assert not first.startswith("bt_margin seed 1: 48 scores of at most 24 tokens (0 of")  # 24 tokens cut some prompts
    meta = json.loads((out / "audit.json").read_text())["meta"]
    assert meta["seconds"] >= meta["seconds_scoring"] + meta["seconds_statistics"]
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    # killed after scoring, before the table: the rerun takes every score from the cache and says so
    (out / "scores.parquet").unlink()
    with caplog.at_level(logging.INFO, logger="rmeval.scoring.run"):
        assert main(argv) == 0
    assert capsys.readouterr().out == first
    assert [r.getMessage() for r in caplog.records if "score cache" in r.getMessage()] == [
        f"bt_margin seed 1: 48 of 48 texts' scores reused from the score cache {out / 'score_cache.sqlite'} "
        "(scored by an earlier run); 0 scored now"]


def test_probe_learners_reach_the_statistics(tmp_path, minilm_ckpt):
    """--probe-learners ridge: the response probes are fitted with ridge alone (not all four)."""
    from rmeval.audit.settings import LEARNERS

    out = tmp_path / "a"
    assert main(["audit", "--checkpoint", str(minilm_ckpt), "--data", "simulated:n_prompts=16,responses_per_prompt=3,"
                 "seed=2", "--out", str(out), "--conditions", "original", "--max-length", "64", "--n-boot", "20",
                 "--n-boot-regression", "20", "--probe-learners", "ridge", "--wandb-mode", "disabled",
                 "--no-progress"]) == 0
    probes = json.loads((out / "audit.json").read_text())["variance_explained"]["response_probes"]
    assert [k for k in probes if k in LEARNERS] == ["ridge"]


def test_stats_keeps_exact_ties_whatever_the_row_order(tmp_path):
    """The planted ties (tests.support.planted_ties) through ``rmeval stats``, rows in three orders:
    the centred top 30% is the tied block's mean rating, 2.3, and the centred Spearman figures are
    those of the exact ranks (scipy on integers), in audit.json every time."""
    from scipy.stats import spearmanr

    from tests.support import planted_ties

    ref = planted_ties()
    rho_cc, rho_cr = spearmanr(ref["role"], ref["h3"])[0], spearmanr(ref["role"], ref["helpfulness"])[0]
    for seed in (0, 5, 8):  # orders whose float sums in row order split the ties (2.39, 2.28, 2.24)
        d = planted_ties(seed)
        d.assign(condition="original")[["prompt_id", "response_id", "condition", "score"]].to_parquet(
            tmp_path / "scores.parquet")
        d[["prompt_id", "response_id", "helpfulness"]].to_parquet(tmp_path / "ratings.parquet")
        out = tmp_path / f"o{seed}"
        assert main(["stats", "--scores", str(tmp_path / "scores.parquet"),
                     "--ratings", str(tmp_path / "ratings.parquet"),
                     "--out", str(out), "--n-boot", "20", "--n-boot-regression", "20", "--wandb-mode", "disabled"]) == 0
        sel = json.loads((out / "audit.json").read_text())["selection"]
        assert sel["top30_centered"]["estimate"] == pytest.approx(2.3, abs=1e-15), seed
        assert sel["spearman"]["centered_vs_centered"] == pytest.approx(rho_cc, abs=1e-15), seed
        assert sel["spearman"]["centered_vs_raw"] == pytest.approx(rho_cr, abs=1e-15), seed


def test_audit_counts_the_rows_it_skipped(tmp_path, demo_ckpt, capsys):
    """on_bad: skip drops the bad rows and the prompts left with one response; the audit says how
    many, on its line, in audit.json and in audit.md."""
    rows = [{"qid": f"q{i}", "question": f"Question number {i}?", "answer": f"answer {j} to {i}", "score": (i + j) % 5}
            for i in range(8) for j in range(2)]
    rows[3]["score"] = "four"
    path = tmp_path / "rated.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = json.dumps({"name": "generic", "path": str(path), "on_bad": "skip", "columns": {
        "prompt_id": "qid", "prompt": "question", "response": "answer", "ratings": {"score": "helpfulness"}}})
    out = tmp_path / "a"
    assert main(["audit", "--checkpoint", str(demo_ckpt), "--data", spec, "--out", str(out), "--conditions",
                 "original", "--n-boot", "20", "--wandb-mode", "disabled", "--no-progress"]) == 0
    assert "; skipped: bad score 1, too few responses 1) -> " in capsys.readouterr().out
    assert json.loads((out / "audit.json").read_text())["meta"]["skipped"] == {"bad_score": 1, "too_few_responses": 1}
    assert "Skipped while reading the data: bad score 1, too few responses 1." in (out / "audit.md").read_text()
