"""The demo console: the fresh score head's load report is silenced, other load problems are not;
one progress bar per run replaces transformers' raw log printer."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from rmcore.console.training import RunProgress, use_progress_bar
from rmcore.models.modeling import load_reward_model
from rmcore.models.tiny import tiny_causal_lm


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("lm") / "lm", ["hello there, how are you today?"] * 20)


def test_fresh_head_report_silenced_other_problems_reported(tiny_lm, tmp_path, capfd, caplog):
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification

    def shown() -> str:  # what reaches a console: log records at WARNING and above, and raw output
        out = capfd.readouterr()
        return " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING) + out.out + out.err

    # control: transformers itself reports the fresh `score` head (and the capture sees it)
    AutoModelForSequenceClassification.from_pretrained(tiny_lm, num_labels=1)
    assert "MISSING" in shown()
    caplog.clear()
    load_reward_model(str(tiny_lm), for_training=True)
    text = shown()
    assert "MISSING" not in text and "LOAD REPORT" not in text

    # a body weight missing from the checkpoint is still reported, by name
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in tiny_lm.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    sd = load_file(broken / "model.safetensors")
    key = next(k for k in sd if "layers.0" in k and k.endswith("up_proj.weight"))
    sd.pop(key)
    save_file(sd, broken / "model.safetensors", metadata={"format": "pt"})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rmcore.console.training"):
        load_reward_model(str(broken))
    warned = " ".join(r.getMessage() for r in caplog.records
                      if r.levelno >= logging.WARNING and r.name == "rmcore.console.training")
    assert key in warned and "score.weight" not in warned


def test_one_progress_bar_per_run(tiny_lm, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    model = AutoModelForSequenceClassification.from_pretrained(tiny_lm, num_labels=1)
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), disable_tqdm=True, report_to=[],
                                                          use_cpu=True))
    use_progress_bar(trainer, "regression seed1")
    kinds = [type(c) for c in trainer.callback_handler.callbacks]
    assert PrinterCallback not in kinds and ProgressCallback not in kinds and kinds.count(RunProgress) == 1
    capsys.readouterr()  # what importing the Trainer printed (transformers' W&B notice under WANDB_MODE=offline)

    bar = RunProgress("bt seed2")
    state = SimpleNamespace(is_world_process_zero=True, max_steps=4, global_step=0)
    bar.on_train_begin(None, state, None)
    for step in range(1, 5):
        state.global_step = step
        bar.on_step_end(None, state, None)
        bar.on_log(None, state, None, logs={"loss": 0.5 / step, "learning_rate": 1e-4})
    assert bar.bar.n == 4
    bar.on_train_end(None, state, None)
    out = capsys.readouterr()
    # stderr is not a terminal here: the run's closing line, with its latest loss; stdout stays empty
    assert "bt seed2: 4 of 4 steps (100%)" in out.err and "loss=0.125" in out.err
    assert out.out == "" and "learning_rate" not in out.err


def test_deepspeed_log_lines_go_to_stderr(capsys):
    """DeepSpeed's LoggerFactory gives its logger its own handler on stdout (propagate off) and
    logs "Setting accelerator to CPU" at import: after results_on_stdout, on stderr, whether the
    handler was there before or is added later (as at deepspeed's import)."""
    import sys

    from rmcore.console.quiet import results_on_stdout

    logger = logging.getLogger("DeepSpeed")
    # the logger as a fresh process has it (deepspeed may have been imported by an earlier test)
    saved = logger.handlers[:], logger.filters[:], logger.propagate
    logger.handlers, logger.filters, logger.propagate = [], [], False
    try:
        before = logging.StreamHandler(stream=sys.stdout)
        logger.addHandler(before)
        results_on_stdout()
        results_on_stdout()  # idempotent: one filter
        logger.addHandler(logging.StreamHandler(stream=sys.stdout))  # what LoggerFactory does at import
        logger.warning("Setting accelerator to CPU.")
        out = capsys.readouterr()
        assert out.out == "" and out.err.count("Setting accelerator to CPU.") == 2
        assert sum(type(f).__name__ == "_StdoutToStderr" for f in logger.filters) == 1
    finally:
        logger.handlers, logger.filters, logger.propagate = saved
