"""`rmeval human`: the ratings-only audit on files written here in the real HelpSteer, HelpSteer2
disagreements and SHP schemas, and on the shipped simulated set."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy.stats import pearsonr, rankdata

from rmcore.data.helpsteer_annotations import load_helpsteer2_annotations
from rmcore.data.loading import load_rating_set
from rmcore.data.shp import load_shp
from rmcore.errors import DataError
from rmeval.cli import main
from tests.support import hand_icc

ATTRS = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


def helpsteer_rows(n_prompts: int = 378, k: int = 4, share: float = 0.26, seed: int = 0) -> list[dict]:
    """HelpSteer-schema rows whose helpfulness has a planted between-prompt share: latent
    u + e with var(u) = share, var(e) = 1 - share - 1/12 (rounding adds 1/12 within prompts)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_prompts):
        u = rng.normal() * np.sqrt(share)
        prompt = f"Question {i}: " + " ".join(["word"] * int(rng.integers(3, 60)))
        if i % 5 == 0:  # a multi-turn prompt in HelpSteer's inline format
            prompt = f"Hi {i}\n<extra_id_1>Assistant\nHello!\n<extra_id_1>User\n{prompt}"
        for j in range(k):
            e = rng.normal() * np.sqrt(1 - share - 1 / 12)
            h = int(np.clip(np.round(2 + u + e), 0, 4))
            rows.append({"prompt": prompt, "response": f"answer {j} to {i} " + "x " * int(rng.integers(5, 80)),
                         "helpfulness": h, "correctness": int(rng.integers(0, 5)), "coherence": 4,
                         "complexity": int(rng.integers(0, 5)), "verbosity": int(rng.integers(0, 5))})
    return rows


def run_human(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out"
    assert main(["human", "--out", str(out), "--n-boot", "400", *args]) == 0
    assert (out / "human.md").read_text().startswith("# Human ratings")
    return json.loads((out / "human.json").read_text())


def test_helpsteer_planted_share_inside_interval(tmp_path: Path):
    rows = helpsteer_rows()
    f = write_jsonl(tmp_path / "helpsteer_val.jsonl.gz", rows)
    res = run_human(tmp_path, "--data", f"helpsteer:path={f},split=validation")
    hl = res["attributes"]["helpfulness"]
    sh = hl["share"]["all"]
    assert sh["n_prompts"] == 378
    assert sh["ci95"][0] < 0.26 < sh["ci95"][1]
    # independent recomputation from the file: ICC(1), ranks, single-turn, LOO correlation
    df = pd.DataFrame(rows)
    g = df["prompt"].to_numpy()
    y = df["helpfulness"].to_numpy(float)
    assert sh["estimate"] == pytest.approx(hand_icc(y, g), abs=1e-10)
    assert hl["share"]["ranks"]["estimate"] == pytest.approx(hand_icc(rankdata(y), g), abs=1e-10)
    st = ~df["prompt"].str.contains("<extra_id_1>").to_numpy()
    assert hl["share"]["single_turn"]["estimate"] == pytest.approx(hand_icc(y[st], g[st]), abs=1e-10)
    assert hl["share"]["ranks_single_turn"]["estimate"] == pytest.approx(hand_icc(rankdata(y[st]), g[st]), abs=1e-10)
    sib = (df.groupby("prompt")["helpfulness"].transform("sum") - y) / 3
    assert hl["loo_correlation"]["estimate"] == pytest.approx(pearsonr(y, sib)[0], abs=1e-12)
    assert {"log_length", "single_turn"} <= set(hl["share"]) and "all" in hl["longer_minus_shorter"]
    assert set(res["attributes"]) == set(ATTRS)


def test_borrowed_reliability_corrects_share(tmp_path: Path):
    f = write_jsonl(tmp_path / "hs.jsonl", helpsteer_rows(n_prompts=60, seed=1))
    res = run_human(tmp_path, "--data", f"helpsteer:path={f}", "--attribute", "helpfulness",
                    "--human-reliability", "hs2_one_vs_rest=0.62")
    obs = res["attributes"]["helpfulness"]["share"]["all"]
    cor = res["share_corrected"]["borrowed:hs2_one_vs_rest"]
    assert cor["estimate"] == pytest.approx(obs["estimate"] / 0.62)
    assert cor["ci95"] == pytest.approx([obs["ci95"][0] / 0.62, obs["ci95"][1] / 0.62])
    assert set(res["attributes"]) == {"helpfulness"}


def test_simulated_set_reproduces_configured_human_share(tmp_path: Path):
    res = run_human(tmp_path, "--data", "simulated:n_prompts=300,human_share=0.2,seed=4", "--attribute", "helpfulness")
    assert res["attributes"]["helpfulness"]["share"]["all"]["estimate"] == pytest.approx(0.2, abs=0.01)


def _disagreement_rows(hs2_rows: list[dict], seed: int = 2) -> list[dict]:
    """The disagreements schema: each attribute a list of the annotators' ratings."""
    rng = np.random.default_rng(seed)
    out = []
    for r in hs2_rows:
        m = int(rng.choice([2, 3, 3, 3, 4, 5]))
        row = {"prompt": r["prompt"], "response": r["response"]}
        for a in ATTRS:
            row[a] = [int(np.clip(r[a] + rng.integers(-1, 2), 0, 4)) for _ in range(m)]
        out.append(row)
    out.append({"prompt": "a train-split prompt", "response": "not in the validation file",
                **{a: [2, 3, 2] for a in ATTRS}})
    return out


def test_helpsteer2_annotations_reliability(tmp_path: Path):
    hs2 = helpsteer_rows(n_prompts=80, k=2, share=0.0, seed=3)
    val = write_jsonl(tmp_path / "validation.jsonl.gz", hs2)
    ann_rows = _disagreement_rows(hs2)
    ann = write_jsonl(tmp_path / "disagreements.jsonl.gz", ann_rows)
    rs = load_rating_set({"name": "helpsteer2", "path": str(val), "split": "validation"})
    table, skipped = load_helpsteer2_annotations(ann, rs)
    assert skipped == {"unmatched": 1}
    assert len(table) == sum(len(r["helpfulness"]) for r in ann_rows[:-1]) * len(ATTRS)
    first = rs.prompts[0].responses[0]
    got = table[(table["response_id"] == first.response_id) & (table["attribute"] == "helpfulness")]
    assert got["value"].tolist() == ann_rows[0]["helpfulness"]

    res = run_human(tmp_path, "--data", f"helpsteer2:path={val},split=validation", "--annotations", str(ann),
                    "--raters-per-rating", "3")
    rel = res["reliability"]
    # pingouin on the responses rated by exactly three annotators equals our ICC(1) restricted to them
    h = pd.DataFrame([{"t": i, "r": j, "v": v} for i, r in enumerate(ann_rows[:-1])
                      for j, v in enumerate(r["helpfulness"])])
    h3 = h[h.groupby("t")["v"].transform("size") == 3]
    icc = pg.intraclass_corr(data=h3, targets="t", raters="r", ratings="v").set_index("Type")["ICC"]
    ref = float(icc["ICC1"] if "ICC1" in icc.index else icc["ICC(1,1)"])
    assert hand_icc(h3["v"].to_numpy(float), h3["t"].to_numpy()) == pytest.approx(ref, abs=1e-10)
    assert rel["single_rater"] == pytest.approx(hand_icc(h["v"].to_numpy(float), h["t"].to_numpy()), abs=1e-10)
    obs = res["attributes"]["helpfulness"]["share"]["all"]["estimate"]
    r3 = 3 * rel["single_rater"] / (1 + 2 * rel["single_rater"])
    assert res["share_corrected"]["single_rater(k=3)"]["estimate"] == pytest.approx(obs / r3)
    assert res["meta"]["annotations"]["skipped"] == {"unmatched": 1}


def test_annotations_bad_row_names_file_row_field(tmp_path: Path, capsys):
    bad = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p", "response": "r", **{a: [1, 2] for a in ATTRS}},
                                             {"prompt": "p", "response": "s", "helpfulness": 3,
                                              **{a: [1] for a in ATTRS[1:]}}])
    with pytest.raises(DataError) as e:
        load_helpsteer2_annotations(bad)
    msg = str(e.value)
    assert "d.jsonl" in msg and "2" in msg and "helpfulness" in msg
    table, skipped = load_helpsteer2_annotations(bad, on_bad="skip")
    assert skipped == {"bad_helpfulness": 1} and table["response_id"].nunique() == 1


def shp_rows(n_posts: int = 120, seed: int = 5) -> list[dict]:
    """SHP-schema rows: each a pair of comments to a post, votes with a post effect and exposure."""
    rng = np.random.default_rng(seed)
    rows = []
    t0 = 1.6e9
    for i in range(n_posts):
        post_t = t0 + rng.uniform(0, 3e7)
        u = rng.normal()
        comments = []
        for c in range(4):
            t = post_t + rng.uniform(0, 7200)
            score = int(max(2, round(np.exp(2 + 0.8 * u + 0.6 * rng.normal()))))
            comments.append((f"c{i}_{c}", f"comment {c} on post {i}", score, t))
        for a, b in [(0, 1), (0, 2), (1, 3), (2, 3)]:
            ca, cb = comments[a], comments[b]
            rows.append({"post_id": f"post{i}", "domain": "askscience_train", "upvote_ratio": 0.95,
                         "history": f"Why is the sky blue? ({i})", "c_root_id_A": ca[0], "c_root_id_B": cb[0],
                         "created_at_utc_A": ca[3], "created_at_utc_B": cb[3], "score_A": ca[2], "score_B": cb[2],
                         "human_ref_A": ca[1], "human_ref_B": cb[1], "labels": int(ca[2] > cb[2]),
                         "seconds_difference": abs(ca[3] - cb[3]),
                         "score_ratio": max(ca[2], cb[2]) / min(ca[2], cb[2])})
    return rows


def test_shp_loader_and_log_vote_share(tmp_path: Path):
    rows = shp_rows()
    f = write_jsonl(tmp_path / "shp_validation.jsonl", rows)
    rs = load_shp(f)
    assert len(rs) == 120 and rs.n_responses == 480 and len(rs.preferences) == 480
    assert all("exposure" in r.meta for p in rs.prompts for r in p.responses)
    res = run_human(tmp_path, "--data", f"shp:path={f}", "--attribute", "log_votes")
    comments = {}
    for r in rows:
        for s in "AB":
            comments[r[f"c_root_id_{s}"]] = (r["post_id"], np.log(r[f"score_{s}"]), r[f"created_at_utc_{s}"])
    post, logv, t = (np.array(x) for x in zip(*comments.values()))
    sh = res["attributes"]["log_votes"]["share"]
    assert sh["all"]["estimate"] == pytest.approx(hand_icc(logv.astype(float), post), abs=1e-10)
    # exposure: log hours before the newest comment, regressed out by OLS (numpy lstsq by hand)
    expo = np.log1p((t.max() - t.astype(float)) / 3600)
    x = np.column_stack([np.ones_like(expo), expo])
    resid = logv.astype(float) - x @ np.linalg.lstsq(x, logv.astype(float), rcond=None)[0]
    assert sh["exposure_adjusted"]["estimate"] == pytest.approx(hand_icc(resid, post), abs=1e-8)


def test_shp_bad_score(tmp_path: Path):
    rows = shp_rows(n_posts=3)
    rows[4]["score_B"] = 0
    f = write_jsonl(tmp_path / "shp.jsonl", rows)
    with pytest.raises(DataError, match="score_B"):
        load_shp(f)
    rs = load_shp(f, on_bad="skip")
    assert rs.skipped["bad_score_B"] == 1


def test_a_preference_set_is_refused_before_any_scoring(tmp_path, capsys, shared_data):
    """RM-Bench carries preference labels, no ratings: one line saying what ``human`` needs."""
    rm_bench = shared_data / "rm-bench" / "chat_filtered.json"
    assert main(["human", "--data", f"rm_bench:{rm_bench}", "--out", str(tmp_path / "h")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no rated attribute" in err[0] and "needs a rating set" in err[0]
    assert not (tmp_path / "h" / "scores.parquet").exists()


def test_the_audit_of_a_preference_set_keeps_the_model_side(tmp_path, capsys, shared_data, minilm_ckpt):
    """The audit of a preference set says in one line that the human-referenced figures are left
    out, then computes the model-side ones (no human share anywhere in audit.json)."""
    rm_bench = shared_data / "rm-bench" / "chat_filtered.json"
    out = tmp_path / "a"
    assert main(["audit", "--checkpoint", str(minilm_ckpt), "--data", f"rm_bench:{rm_bench}", "--out", str(out),
                 "--max-prompts", "6", "--conditions", "original", "generic", "--max-length", "64", "--n-boot", "30",
                 "--n-boot-regression", "30", "--wandb-mode", "disabled"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "no rated attribute" in line]
    assert len(err) == 1 and "human-referenced figures are left out" in err[0]
    doc = json.loads((out / "audit.json").read_text())
    assert "original" in doc["share"] and "human" not in doc["share"] and "share_vs_human" not in doc


def test_skipped_rows_are_counted_on_the_console_and_in_the_report(tmp_path: Path, capsys):
    """on_bad: skip drops the bad rows, and says how many: the command's line and human.md."""
    rows = helpsteer_rows(n_prompts=30, seed=2)
    rows[5]["helpfulness"] = "lots"  # a bad rating
    rows[9]["response"] = ""  # a response with no text
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    spec = json.dumps({"name": "helpsteer", "path": str(path), "on_bad": "skip"})
    res = run_human(tmp_path, "--data", spec)
    skipped = res["meta"]["skipped"]
    assert sum(skipped.values()) == 2 and set(skipped) == {"bad_helpfulness", "bad_response"}
    line = capsys.readouterr().out
    assert "(skipped: bad helpfulness 1, bad response 1) -> " in line
    assert ("Skipped while reading the data: bad helpfulness 1, bad response 1."
            in (tmp_path / "out" / "human.md").read_text())
