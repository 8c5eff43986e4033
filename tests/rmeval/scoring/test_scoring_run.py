"""Resuming a scores file: only rows of the same scorer are reused; ids survive a float round trip."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmcore.data.loading import load_rating_set
from rmcore.data.simulated import simulate_rating_set
from rmcore.errors import DataError
from rmeval.scoring.base import Scorer
from rmeval.scoring.run import score_conditions
from rmeval.stats.audit_sections import compute_audit
from rmeval.stats.settings import StatsSettings
from rmeval.tables import norm_id
from tests.support import save_tiny_classifier


class ConstScorer(Scorer):
    kind = "const"

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value, self.calls = value, 0

    @property
    def fingerprint(self) -> str:
        return f"const:{self.value}"

    def score(self, items):
        self.calls += len(items)
        self._record_flags(np.zeros((len(items), 2), dtype=bool))
        return np.full(len(items), self.value)


def test_resume_reuses_only_the_same_scorers_rows(tmp_path):
    rs = simulate_rating_set(n_prompts=6, responses_per_prompt=2, seed=0)
    out = tmp_path / "scores.parquet"
    a = ConstScorer(1.0)
    score_conditions(a, rs, ["original"], out_path=out)
    assert a.calls == 12
    again = ConstScorer(1.0)
    df = score_conditions(again, rs, ["original", "generic"], out_path=out)
    assert again.calls == 12  # original resumed, generic scored
    assert set(df["condition"]) == {"original", "generic"}
    other = ConstScorer(7.0)  # another checkpoint: nothing may be reused
    df = score_conditions(other, rs, ["original"], out_path=out)
    assert other.calls == 12 and (df["score"] == 7.0).all()
    # the file keeps the earlier conditions of the same scorer
    third = ConstScorer(7.0)
    score_conditions(third, rs, ["generic"], out_path=out)
    assert set(pd.read_parquet(out)["condition"]) == {"original", "generic"}


def test_integer_ids_survive_float_round_trip():
    assert norm_id(2.0) == "2" and norm_id(np.float64(3)) == "3" and norm_id("a1") == "a1" and norm_id(2.5) == "2.5"
    rng = np.random.default_rng(0)
    ratings = pd.DataFrame({"prompt_id": np.repeat(np.arange(1, 9), 2), "response_id": np.arange(16),
                            "helpfulness": rng.integers(0, 5, 16).astype(float), "single_turn": True})
    rows = []
    for p in range(1, 9):
        for r in (2 * (p - 1), 2 * (p - 1) + 1):
            rows.append({"prompt_id": p, "response_id": r, "condition": "original", "variant": 0,
                         "donor_prompt_id": None, "score": rng.normal()})
            donor = p % 8 + 1
            rows.append({"prompt_id": p, "response_id": r, "condition": "random", "variant": 0,
                         "donor_prompt_id": float(donor), "score": rng.normal()})
    scores = pd.DataFrame(rows)
    audit = compute_audit(scores, ratings, StatsSettings(n_boot=50, n_boot_regression=50))
    assert "random" in audit["transplant"]


def test_missing_rating_is_an_error_naming_the_row():
    ratings = pd.DataFrame({"prompt_id": ["a", "a", "b", "b"], "response_id": ["1", "2", "3", "4"],
                            "helpfulness": [1.0, np.nan, 2.0, 3.0]})
    scores = pd.DataFrame({"prompt_id": ["a", "a", "b", "b"], "response_id": ["1", "2", "3", "4"],
                           "condition": "original", "variant": 0, "donor_prompt_id": None,
                           "score": [0.1, 0.2, 0.3, 0.4]})
    with pytest.raises(DataError, match=r"row 2, field 'helpfulness': rating is not a finite number, got nan"):
        compute_audit(scores, ratings, StatsSettings(n_boot=10))


def test_resume_never_reuses_rows_of_other_data_with_the_same_ids(tmp_path):
    """Two data sets can share prompt and response ids (simulated seeds, RM-Bench and HH-RLHF rows
    numbered alike): rows scored on one must not stand for the other."""
    out = tmp_path / "scores.parquet"
    first, second = (simulate_rating_set(n_prompts=6, responses_per_prompt=2, seed=s) for s in (0, 1))
    assert [p.prompt_id for p in first.prompts] == [p.prompt_id for p in second.prompts]  # same ids
    a = ConstScorer(1.0)
    score_conditions(a, first, ["original"], out_path=out)
    b = ConstScorer(1.0)
    score_conditions(b, second, ["original"], out_path=out)
    assert b.calls == 12  # other texts: all scored again
    c = ConstScorer(1.0)
    score_conditions(c, second, ["original"], out_path=out)
    assert c.calls == 0  # the same data again: resumed


@pytest.mark.usefixtures("one_torch_thread")
def test_rerun_after_a_run_with_nothing_to_score(tmp_path):
    """An empty scores file (no multi-turn prompt for last_turn) is read back, not refused."""
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    save_tiny_classifier(tmp_path / "m")
    rs = load_rating_set({"name": "simulated", "n_prompts": 4, "responses_per_prompt": 2, "seed": 0,
                          "multi_turn_fraction": 0.0})
    for ext in ("parquet", "jsonl"):
        scorer = SeqClassifierScorer(str(tmp_path / "m"))
        for _ in range(2):
            df = score_conditions(scorer, rs, ["last_turn"], out_path=tmp_path / f"s.{ext}", progress=False)
            assert len(df) == 0


class CuttingScorer(ConstScorer):
    """Flags every text whose response has an even length as having its prompt cut, every third text
    of a call as having its response cut (a fixed pattern to count against)."""

    def score(self, items):
        self.calls += len(items)
        flags = np.array([[len(r) % 2 == 0, i % 3 == 0] for i, (_, r) in enumerate(items)], dtype=bool)
        self._record_flags(flags.reshape(-1, 2))
        return np.full(len(items), self.value)


def test_rerun_into_the_same_file_keeps_the_truncation_counts(tmp_path):
    """A finished run rerun into the same scores file scores nothing and reports the same counts: the
    flags are kept in the table (today's rows resumed with none counted 0)."""
    from rmeval.scoring.run import truncation_note, truncation_summary

    rs = simulate_rating_set(n_prompts=6, responses_per_prompt=2, seed=0)
    out = tmp_path / "scores.parquet"
    first = score_conditions(CuttingScorer(1.0), rs, ["original", "random"], out_path=out, n_donors=2)
    total = truncation_summary(first)["total"]
    assert total["n"] == 36 and total["prompt_truncated"] > 0 and total["n_resumed"] == 0
    again = CuttingScorer(1.0)
    second = score_conditions(again, rs, ["original", "random"], out_path=out, n_donors=2)
    assert again.calls == 0
    assert truncation_summary(second)["by_condition"] == {
        c: {**v, "n_resumed": v["n"]} for c, v in truncation_summary(first)["by_condition"].items()}
    assert truncation_note(truncation_summary(second)["total"]) == truncation_note(total)
    pd.testing.assert_frame_equal(second, first)
    # a table written before the flags were kept is not resumed with unknown counts: rescored
    pd.read_parquet(out).drop(columns=["prompt_truncated", "response_truncated"]).to_parquet(out)
    old = CuttingScorer(1.0)
    third = score_conditions(old, rs, ["original", "random"], out_path=out, n_donors=2)
    assert old.calls > 0 and truncation_summary(third)["total"] == total


def test_truncation_note_says_what_it_counts():
    from rmeval.scoring.run import truncation_note

    assert truncation_note({"n": 9320, "n_resumed": 9320, "prompt_truncated": 53, "response_truncated": 0}) == \
        "53 of 9,320 texts had their prompt cut; 0 responses cut"
    assert truncation_note({"n": 2, "n_resumed": 0, "prompt_truncated": 0, "response_truncated": 1}) == \
        "0 of 2 texts had their prompt cut; 1 response cut"


def test_scoring_progress_reaches_a_stderr_that_is_not_a_terminal(tmp_path, capsys):
    rs = simulate_rating_set(n_prompts=6, responses_per_prompt=2, seed=0)
    score_conditions(ConstScorer(1.0), rs, ["original", "generic"], label="bt seed 1")
    out = capsys.readouterr()  # pytest's stderr is not a terminal, as a log file is not
    assert out.out == ""
    assert out.err.splitlines()[-1].startswith("scoring bt seed 1: 24 of 24 texts (100%), ")
    score_conditions(ConstScorer(1.0), rs, ["original"], progress=False)
    assert capsys.readouterr().err == ""
