"""Every arm learns the simulated set: held-out pair accuracy well above chance after a short run
on the demo recipe (MiniLM, 200 simulated prompts, 480 training pairs, 30 steps), with noise-free
raters and labels, so that the learnable signal, not the luck of a 30-step run, decides the result."""

from __future__ import annotations

import pytest

from rmtrain.arms import ARMS
from rmtrain.config import load_train_config
from rmtrain.train import train
from tests.support import ROOT

# The two losses the study contrasts (regression on ratings, Bradley-Terry on pairs) run in the default
# suite; the other arms (~60 s each at one thread: a third of the suite's time) run with the heavy
# tests, bash scripts/test.sh -m heavy. Every arm's training and checkpoint are in test_train_arms.py.
DEFAULT_SUITE_ARMS = ("bradley_terry", "regression")


@pytest.mark.slow
@pytest.mark.parametrize("arm", [a if a in DEFAULT_SUITE_ARMS else pytest.param(a, marks=pytest.mark.heavy)
                                 for a in sorted(ARMS)])
def test_arm_beats_chance_on_heldout_prompts(arm, tmp_path):
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
