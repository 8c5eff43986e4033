"""Each ``rmeval`` command's flags come from its settings dataclass (``rmcore.settings.fields``): every
field a flag and every flag a field, the defaults the dataclasses', and the flags that turn a
held block on (``--suitability``, ``--probe-*``, ``--judge-items``, ``--baselines``) build it."""

from __future__ import annotations

import dataclasses

import pytest

from rmcore.errors import ConfigError
from rmcore.models.device import Placement
from rmcore.settings.commands import recipe_overrides
from rmcore.settings.fields import flag_names, from_args, nesting, parser_flags
from rmeval.cli import build_parser
from tests.support import subcommands

# Fields of the settings that are not flags, and why (any other field must be a flag or held settings).
NOT_FLAGS = {
    ("AuditCommand", "argv"), ("PairwiseCommand", "argv"),  # the command line, for --num-processes
    ("ScorerSettings", "model"),  # the command's --checkpoint
    ("JudgeProfileSettings", "max_length"), ("JudgeProfileSettings", "batch_size"),  # the scorer's
    ("StatsSettings", "top_fraction"), ("StatsSettings", "probe_learners"),  # set by code
    ("StatsSettings", "probe_jobs"),
    ("SuitabilityAuditSettings", "max_prompts"),  # the command's --max-prompts
    ("PromptVariantSettings", "judge_max_length"), ("AnalysisSettings", "controls"),
    ("AnalysisSettings", "jobs"), ("AnalysisSettings", "progress"),  # set by code, as StatsSettings.probe_jobs
    ("BaselineSettings", "seed"),  # the reweighting's --seed
}


COMMANDS = dict(subcommands(build_parser()))
REQUIRED = {
    "audit": ["--checkpoint", "c", "--data", "d", "--out", "o"],
    "pairwise": ["--checkpoint", "c", "--data", "d", "--out", "o"],
    "suitability": ["--checkpoint", "c", "--data", "d", "--out", "o"],
    "suitability-stats": ["--pairs", "p", "--out", "o"],
    "stats": ["--scores", "s", "--ratings", "r", "--out", "o"],
    "features": ["--data", "d", "--out", "o"],
    "human": ["--data", "d", "--out", "o"],
    "variants": ["--data", "d", "--task", "paraphrase", "--out", "o"],
    "serve-reward": ["--checkpoint", "c"],
    "pool": ["--config", "r.yaml"], "leaderboard": ["--config", "r.yaml"],
    "judges elicit": ["--out", "o"],
    "judges analyze": ["--judgments", "j", "--out", "o"],
    "judges reweight": ["--judgments", "j", "--items", "i", "--out", "o"],
    "reproduce": ["r.yaml"],  # the recipe, a positional argument
}


def _read(command: str, *flags: str):
    sp = COMMANDS[command]
    return from_args(sp.get_default("settings"), sp.parse_args([*REQUIRED[command], *flags]))


def test_every_command_has_its_settings():
    assert set(COMMANDS) == set(REQUIRED)


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_every_flag_is_a_field_and_every_field_a_flag(command):
    sp = COMMANDS[command]
    cls = sp.get_default("settings")
    assert parser_flags(sp) == flag_names(cls)
    todo = [cls]
    while todo:  # every field of the settings and of what they hold: a flag, held settings, or a known non-flag
        c = todo.pop()
        for f in dataclasses.fields(c):
            if nesting(f) is not None:
                todo.append(nesting(f).cls or type(f.default_factory()))
            else:
                assert "matchrm.option" in f.metadata or (c.__name__, f.name) in NOT_FLAGS, (c.__name__, f.name)


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_no_optional_flag_gives_the_dataclass_defaults(command):
    s = _read(command)
    cls = type(s)
    argv = REQUIRED[command]
    given = {flag[2:].replace("-", "_"): value for flag, value in zip(argv[::2], argv[1::2])}
    kwargs = {f.name: given[f.name] for f in dataclasses.fields(cls) if f.name in given}
    if command == "reproduce":
        kwargs["recipe"] = "r.yaml"
    if command == "variants":
        from rmeval.audit.settings import PromptVariantSettings

        kwargs["variants"] = PromptVariantSettings(task="paraphrase")
    assert s == cls(**kwargs)


def test_todays_defaults_spot_checked():
    a = _read("audit")
    assert (a.audit.stats.n_boot, a.audit.stats.n_boot_regression, a.audit.stats.seed) == (2000, 5000, 0)
    assert (a.scorer.kind, a.scorer.batch_size, a.scorer.max_length, a.scorer.beta) == ("seq_classifier", 32, None, 0.1)
    assert a.scorer.placement == Placement() and a.scorer.drop_special == () and a.num_processes == 1
    assert (a.audit.conditions, a.audit.n_donors, a.audit.progress, a.audit.stats.human_reliability) == (
        None, 4, True, {})
    assert a.audit.features is None and a.audit.judge is None and a.audit.suitability is None
    assert (a.wandb.wandb_project, a.wandb.wandb_mode) == (None, None)  # None: the training run's project
    p = _read("pairwise").pairwise
    assert (p.n_boot, p.seed, p.ties, p.cache, p.progress) == (2000, 0, "half", None, True)
    s = _read("suitability").suitability
    assert (s.n_permutations, s.q, s.eta, s.margin, s.alpha, s.weighting, s.null_share, s.metric, s.robustness) == (
        10_000, 0.05, 0.5, None, 0.05, None, None, "log_confidence", True)
    assert (s.judge_style, s.judge_explain_tokens, s.language, s.base_level, s.max_items) == (
        "verdict", 256, "Chinese", 0, None)
    assert _read("suitability-stats").suitability.groups is None
    f = _read("features")
    assert (f.features.n_topics, f.features.batch_size, f.features.max_length, f.features.embedders, f.seed) == (
        20, 32, 512, [], 0)
    h = _read("human").human
    assert (h.raters_per_rating, h.n_boot, h.reliabilities, h.max_prompts) == (1.0, 2000, {}, None)
    v = _read("variants").variants
    assert (v.generator, v.n, v.threshold, v.subtype, v.placement) == ("simulated", 4, 0.5, None, Placement())
    sv = _read("serve-reward").server
    assert (sv.host, sv.port, sv.max_length, sv.max_batch_tokens, sv.max_batch_items, sv.batch_wait_ms,
            sv.max_body_bytes, sv.request_timeout) == ("127.0.0.1", 5000, None, 32768, 256, 0.0, 32 * 2**20, 60.0)
    e = _read("judges elicit")
    assert (e.max_length, e.batch_size, e.concurrency, e.chunk_items, e.api_key_env, e.executor, e.n_shards) == (
        4096, 32, 8, 2, "OPENAI_API_KEY", "none", 1)
    assert (e.data, e.attribute_names, e.overall, e.prefix_reuse, e.executor_params.params()) == (
        [], [], True, True, {})
    an = _read("judges analyze").analysis
    assert (an.attributes, an.n_splits, an.null_repeats, an.min_shared, an.min_n_source, an.min_n_pooled) == (
        None, 20, 20, 20, 50, 200)
    r = _read("judges reweight")
    assert (r.reweight.budgets, r.reweight.n_repeats, r.reweight.top_k, r.baselines) == ((32, 64, 128, 256), 10,
                                                                                        (6, 12), None)
    x = _read("pool")
    assert (x.out, x.overrides, recipe_overrides(x)) == (None, [], {})


def test_flags_turn_held_settings_on_and_share_the_scorer():
    a = _read("audit", "--suitability", "--probe-learners", "ridge", "--judge-items", "items.jsonl",
              "--batch-size", "8", "--max-length", "64", "--max-prompts", "5", "--q", "0.1")
    assert a.audit.suitability.perturbations == [] and a.audit.suitability.q == 0.1
    assert a.audit.suitability.max_prompts == 5 and a.audit.suitability.n_permutations == 10_000
    assert (a.audit.features.learners, a.audit.features.batch_size, a.audit.features.embedders) == (["ridge"], 8, [])
    assert (a.audit.judge.items, a.audit.judge.attributes, a.audit.judge.max_length, a.audit.judge.batch_size) == (
        "items.jsonl", ["core"], 64, 8)
    # a held block's flag without the flag that turns the block on is refused, not silently dropped
    for command, flags, on in (("audit", ("--q", "0.1"), "--suitability"),
                               ("audit", ("--judge-attribute-names", "core"), "--judge-items"),
                               ("judges reweight", ("--baseline-model", "m"), "--baselines")):
        with pytest.raises(ConfigError, match=rf"^{flags[0]} has no effect without {on}, "):
            _read(command, *flags)
    st = _read("stats", "--probe-learners", "ridge,mlp", "--human-reliability", "a=0.5", "0.25")
    assert st.audit.features.learners == ["ridge", "mlp"] and st.audit.stats.human_reliability == {"a": 0.5,
                                                                                                   "0.25": 0.25}
    r = _read("judges reweight", "--baselines", "rubric", "--baseline-model", "m", "--baseline-judge", "j",
              "--seed", "3", "--budgets", "8,16")
    assert (r.baselines.kinds, r.baselines.model, r.baselines.seed, r.baselines.rubric_k, r.baselines.lora_lr) == (
        ("rubric",), "m", 3, 6, 2e-4)
    assert r.reweight.budgets == (8, 16)
    e = _read("judges elicit", "--data", "a", "--data", "b", "--timeout-min", "5", "--no-overall", "--device", "cpu")
    assert (e.data, e.executor_params.params(), e.overall, e.placement.device) == (["a", "b"], {"timeout_min": 5},
                                                                                   False, "cpu")


def test_the_device_flags_are_grouped_in_the_help():
    for command in ("audit", "pairwise", "suitability", "variants", "serve-reward", "judges elicit"):
        groups = {g.title: {a.option_strings[0] for a in g._group_actions} for g in COMMANDS[command]._action_groups}
        assert groups["where the model runs"] == {"--device", "--dtype", "--attn-implementation",
                                                  "--trust-remote-code", "--device-map"}, command
