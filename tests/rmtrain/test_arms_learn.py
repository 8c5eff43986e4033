"""Every arm learns the simulated set: held-out pair accuracy well above chance after a short run
on the demo recipe (MiniLM, 200 simulated prompts, 480 training pairs, 30 steps)."""

from __future__ import annotations

import pytest

from rmtrain.arms import ARMS
from rmtrain.config import load_train_config
from rmtrain.train import train
from tests.support import ROOT


@pytest.mark.slow
# shuffled_mean (~60 s at one thread) runs with the heavy tests: bash scripts/test.sh -m heavy
@pytest.mark.parametrize("arm", [pytest.param(a, marks=pytest.mark.heavy) if a == "shuffled_mean" else a
                                 for a in sorted(ARMS)])
def test_arm_beats_chance_on_heldout_prompts(arm, tmp_path):
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", {
        "arm": arm, "output_dir": str(tmp_path / arm), "data.n_prompts": 200, "max_train_pairs": 480,
        # the test's own split (the demo's is smaller) and the upper rate of the demo's search grid:
        # the simulated set's quality now depends on prompt-response match, which 30 steps at 1e-4
        # do not reach for every arm (regression: 0.585)
        "heldout_fraction": 0.2, "selection_fraction": 0.0, "training.learning_rate": 3e-4,
        "training.max_length": 96, "wandb.mode": "disabled"})
    s = train(cfg)
    assert s["n_heldout_pairs"] >= 150
    # chance is 0.5; label noise (10% flipped) caps the attainable accuracy near 0.8. A 30-step run
    # varies with the training seed and dropout draws: bt_margin gave 0.585-0.673 over seeds 1-5,
    # with and without the packed encoder forward (mean 0.629 vs 0.632), so 0.62 failed 4 runs in
    # 10; 0.58 is two binomial standard errors (0.038 at n=171) above chance.
    assert s["heldout_pair_accuracy"] > 0.58, s
