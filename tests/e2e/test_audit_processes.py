"""An audit shared by several processes: each scores its share, the main process merges the parts
into the one scores table and computes the statistics once. The table equals a one-process run's
and so do the statistics; the score cache stays whole with several writers."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmcore.data.loading import load_data
from rmeval.scoring.run import KEY_COLUMNS, Shard, assign_shards, score_conditions
from rmeval.scoring.seq_classifier import SeqClassifierScorer

SPEC = "simulated:n_prompts=6,responses_per_prompt=2,seed=2"
CONDITIONS = ["original", "generic", "random"]


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["donor_prompt_id"] = df["donor_prompt_id"].fillna("")
    return df.sort_values(KEY_COLUMNS).reset_index(drop=True)


def _score(ckpt: Path, out: Path, shard: Shard | None, results: dict, key: str) -> None:
    rs = load_data(SPEC)
    scorer = SeqClassifierScorer(ckpt, max_length=48, batch_size=8)
    results[key] = score_conditions(scorer, rs, CONDITIONS, out_path=out / "scores.parquet",
                                    cache_path=out / "score_cache.sqlite", progress=False, shard=shard, seed=0,
                                    n_donors=2)


@pytest.mark.parametrize("world", [3])  # two processes: the heavy command test below
def test_shared_scoring_equals_one_process(tmp_path, minilm_ckpt, world):
    """Every rank's share, then the main process's merge. A rank other than the main one writes its
    part and returns at once (it waits for nobody), so the ranks can run one after the other here:
    the same code as separate processes, without starting them."""
    results: dict = {}
    _score(minilm_ckpt, tmp_path / "one", None, results, "one")
    for r in range(1, world):
        _score(minilm_ckpt, tmp_path / "many", Shard(r, world), results, f"rank{r}")
    parts = sorted(p.name for p in (tmp_path / "many" / ".parts").iterdir())
    assert len(parts) == world - 1 and all(f"-of-{world}.parquet" in p for p in parts)
    _score(minilm_ckpt, tmp_path / "many", Shard(0, world), results, "rank0")
    assert all(results[f"rank{r}"] is None for r in range(1, world))  # only the main process gets the table
    one, many = _sorted(results["one"]), _sorted(results["rank0"])
    pd.testing.assert_frame_equal(one[KEY_COLUMNS], many[KEY_COLUMNS])
    np.testing.assert_allclose(many["score"], one["score"], atol=1e-6, rtol=0)
    assert results["rank0"].attrs["truncation"] == results["one"].attrs["truncation"]
    assert not (tmp_path / "many" / ".parts").exists()  # merged parts are removed
    written = _sorted(pd.read_parquet(tmp_path / "many" / "scores.parquet"))
    np.testing.assert_allclose(written["score"], one["score"], atol=1e-6, rtol=0)


def test_a_rank_with_nothing_to_score_still_reports(tmp_path, minilm_ckpt):
    """More processes than conversations: the idle rank writes an empty part, so the main one
    does not wait for ever."""
    rs = load_data("simulated:n_prompts=2,responses_per_prompt=2,seed=0")
    tables = []
    for r in (3, 2, 1, 0):
        scorer = SeqClassifierScorer(minilm_ckpt, max_length=64)
        tables.append(score_conditions(scorer, rs, ["original"], out_path=tmp_path / "scores.parquet",
                                       progress=False, shard=Shard(r, 4)))
    assert tables[:3] == [None, None, None] and len(tables[3]) == 4 and tables[3]["score"].notna().all()


def test_shards_keep_a_conversation_together_and_balance_the_load():
    convs = [[{"role": "user", "content": f"prompt {i}"}] for i in range(6)]
    items = [(convs[i % 6], f"response {j}") for i in range(6) for j in range(3)]
    lengths = [10 * (1 + i % 6) for i in range(len(items))]  # conversation k carries 30 (k+1) characters
    owner = assign_shards(items, lengths, 2)
    for k in range(6):
        assert len({owner[i] for i, it in enumerate(items) if it[0] is convs[k]}) == 1
    loads = [sum(length for length, o in zip(lengths, owner) if o == r) for r in range(2)]
    # LPT on group totals 180, 150, 120, 90, 60, 30: 180+90+60 = 330 and 150+120+30 = 300
    assert sorted(loads) == [300, 330]
    assert (assign_shards(items, lengths, 2) == owner).all()  # the same on every rank


def _fill(path: str, worker: int, n: int) -> None:
    from rmcore.io.cache import SqliteCache

    cache = SqliteCache(path, "t", ["value REAL"])
    keys = [f"k{i}" for i in range(n)]
    order = keys[worker::3] + keys  # overlapping keys, written in different orders
    cache.fill(order, order, lambda chunk: [(float(k[1:]) * 2,) for k in chunk], chunk_size=7)
    cache.close()


def test_score_cache_stays_whole_with_several_writers(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_fill, args=(path, w, 300)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    from rmcore.io.cache import SqliteCache

    cache = SqliteCache(path, "t", ["value REAL"])
    rows = cache.get_many([f"k{i}" for i in range(300)])
    assert len(cache) == 300 and all(rows[f"k{i}"] == (2.0 * i,) for i in range(300))


@pytest.mark.heavy  # two more Python processes with torch: about a minute on 2 cores
def test_two_process_audit_command_equals_one_process(tmp_path, minilm_ckpt):
    """`rmeval audit --num-processes 2`: two real CPU processes under accelerate launch (--multi_gpu
    with ACCELERATE_USE_CPU=1); same scores table to 1e-6, same statistics."""
    from rmeval.cli import main

    # texts long enough that no truncated transplant text equals its original (a tie scored a float
    # rounding apart would flip an accuracy)
    common = ["--checkpoint", str(minilm_ckpt), "--data", "simulated:n_prompts=12,responses_per_prompt=3,seed=2",
              "--conditions", *CONDITIONS, "--max-length", "256", "--n-donors", "2", "--n-boot", "200",
              "--n-boot-regression", "200", "--wandb-mode", "disabled", "--no-progress"]
    assert main(["audit", *common, "--out", str(tmp_path / "one")]) == 0
    assert main(["audit", *common, "--out", str(tmp_path / "two"), "--num-processes", "2"]) == 0
    one, two = (_sorted(pd.read_parquet(tmp_path / d / "scores.parquet")) for d in ("one", "two"))
    pd.testing.assert_frame_equal(one[KEY_COLUMNS], two[KEY_COLUMNS])
    np.testing.assert_allclose(two["score"], one["score"], atol=1e-6, rtol=0)
    a1, a2 = (json.loads((tmp_path / d / "audit.json").read_text()) for d in ("one", "two"))
    assert a2["meta"]["n_processes"] == 2 and a1["meta"]["n_processes"] == 1
    # The two processes batch the texts differently, so float32 rounding moves scores by up to delta
    # (4e-8 here). Every figure compared is a smooth function of the scores measured against their
    # within-prompt spread sd (a share is a ratio of sums of squared deviations; a coefficient or a
    # bootstrap bound, of such sums): to first order a relative change of at most a few delta/sd.
    # 10 delta/sd bounds it (8e-5 here; the largest change seen is 1.8e-6), and delta = 0 asks for equality.
    delta = float(np.abs(two["score"].to_numpy() - one["score"].to_numpy()).max())
    sd = float(one[one["condition"] == "original"].groupby("prompt_id")["score"].std().mean())
    for key in ("share", "transplant", "sibling_regression"):
        assert json.dumps(a1[key], sort_keys=True) == json.dumps(a2[key], sort_keys=True) or \
            _close(a1[key], a2[key], 10 * delta / sd), key


def _close(a, b, rel: float) -> bool:
    """Equal up to a relative change ``rel`` of every number (1e-12 absolute for zeros)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=1e-12, nan_ok=True)
    return a == b
