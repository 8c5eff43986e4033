"""One flag vocabulary across ``rmtrain`` and ``rmeval`` (issue 26, item 5): every flag of every
subcommand of both tools is listed here with the concept it names, and each concept has one flag.
A new flag fails this test until it is added to the table under a concept of its own, or under an
existing concept's name; a renamed flag keeps its old name as a hidden alias that warns once and
reads onto the new field (``rmcore.settings.fields``, ``Option.deprecated``).

The table is written by hand from the commands' help (not read from the parsers), so a flag that
changes name or appears fails here."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import pytest

from rmcore.settings.fields import AppendEach, parser_flags, renamed_flags
from rmeval.cli import build_parser as rmeval_parser
from rmeval.cli import main as rmeval_main
from rmtrain.cli import build_parser as rmtrain_parser
from rmtrain.cli import main as rmtrain_main
from tests.support import ROOT, subcommands

COMMANDS = {**dict(subcommands(rmeval_parser(), ("rmeval",), has="func")),
            **dict(subcommands(rmtrain_parser(), ("rmtrain",), has="func"))}

# flag -> the concept it names (one flag per concept across both tools)
VOCABULARY = {
    # what a command reads and writes
    "--config": "the recipe a command runs",
    "--set": "an override of a recipe key (KEY=VALUE, once per key)",
    "--out": "the output folder",
    "--data": "a data spec",
    "--max-prompts": "a seeded sample of the data's prompts",
    "--checkpoint": "the reward model(s) scored",
    "--items": "a judge items table",
    "--judgments": "a judgment store or a long judgments table",
    "--table": "the merged judgments also written as a long table",
    "--scores": "a scores table",
    "--ratings": "a ratings table",
    "--preferences": "a preferences table",
    "--features": "a folder of feature tables",
    "--pairs": "a table of precomputed confidences",
    "--annotations": "per-annotator ratings",
    "--reference-scores": "scores of an independent reference pool",
    "--reference-pool": "a reference pool table to score",
    "--compare-scores": "scores of the same texts scored another way",
    "--paraphrase-file": "paraphrases of the prompts",
    "--related-file": "related tasks of the prompts",
    "--rewrite-file": "rewritten texts for CODE@file",
    "--rewrite-cache": "the rewrite cache",
    "--cache": "the score cache",
    "--attributes": "an attribute inventory YAML",
    "--attribute-names": "a subset of the attributes, by name",
    "--attribute": "the rated attribute",
    "--extend-attributes": "add the inventory to the shipped one",
    # runs, seeds, resamples, W&B
    "--seed": "the seed",
    "--n-boot": "bootstrap resamples",
    "--n-boot-regression": "bootstrap resamples of the sibling regression",
    "--force": "start over instead of resuming",
    "--dry-run": "show what would run, run nothing",
    "--no-progress": "no progress on stderr",
    "--wandb-mode": "W&B mode",
    "--wandb-project": "W&B project",
    "--wandb-group": "W&B group",
    "--executor": "where the jobs run (local, SLURM, ...)",
    "--partition": "the SLURM partition",
    "--timeout-min": "minutes a job may run",
    "--gpus-per-node": "GPUs of a job",
    "--cpus-per-task": "CPUs of an array task",
    "--array-parallelism": "array tasks at once",
    "--account": "the SLURM account jobs are charged to",
    "--qos": "the SLURM quality of service",
    "--sbatch": "any other #SBATCH option (KEY=VALUE, once per option)",
    "--setup": "a shell line run before each array task",
    "--gpu-memory-gb": "GB of memory of one GPU",
    "--node-gpus": "GPUs of one node of the cluster",
    "--download-mb-s": "Hub download bandwidth per task (MB/s)",
    "--data-source": "where a recipe's local data source is (NAME=PATH)",
    "--max-parallel": "local runs at once",
    "--n-shards": "shards of the items",
    "--shard": "run one shard",
    "--num-processes": "processes sharing the scoring",
    "--only": "only these rows of a reproduction",
    "--stand-in": "tiny local stand-ins for every model",
    # the model and where it runs
    "--device": "where a model runs",
    "--dtype": "a model's dtype",
    "--attn-implementation": "the attention kernel",
    "--trust-remote-code": "run a checkpoint's own modelling code",
    "--device-map": "spread a model over GPUs",
    "--batch-size": "texts per forward",
    "--max-length": "tokens per text",
    "--max-tokens": "padded tokens per batch",
    "--scorer": "how a checkpoint is scored",
    "--loader": "the reward-model loader",
    "--reward-head": "which output of a multi-output model is the reward",
    "--drop-special-tokens": "score without BOS/EOS",
    "--beta": "DPO beta",
    "--reference": "DPO reference model",
    "--model": "the model a command trains from or judges with",
    "--arm": "the training arm",
    "--reward-model": "the reward model a policy trains against",
    "--environment": "the policy's environment",
    "--launch": "start OpenRLHF",
    "--collect": "collect an OpenRLHF run",
    "--clean": "the clean policy",
    "--perturbed": "the perturbed policy",
    "--judge": "the judge of policy-eval",
    "--judge-base-url": "the judge's OpenAI-compatible endpoint",
    "--base-url": "an OpenAI-compatible endpoint",
    "--endpoint": "the elicited judge's OpenAI-compatible endpoint",
    "--endpoint-model": "the served model's name at --endpoint",
    "--api-key-env": "the variable holding an endpoint's API key",
    "--concurrency": "parallel requests",
    "--reasoning-tokens": "a reasoning judge's reply budget",
    "--lora-dtype": "the LoRA baseline's training dtype",
    "--chunk-items": "items per committed chunk",
    "--judge-name": "a judge's name in the judgments table",
    "--no-overall": "skip the overall verdict",
    "--no-prefix-reuse": "one full forward per call",
    "--margin": "a margin (effect size; unresolved judgments)",
    "--max-items-per-source": "the first N items of each data source",
    # the audit
    "--conditions": "the audit's conditions",
    "--n-donors": "donor prompts per transplant",
    "--embedder": "the embedding condition's encoder",
    "--human-reliability": "rater reliabilities for the corrected human share",
    "--raters-per-rating": "raters averaged into a rating",
    "--probe-learners": "the response probes' learners",
    "--probe-embedders": "the audit's feature probes' encoders",
    "--probe-base-model": "the audit's hidden-state probe's base model",
    "--embedders": "rmeval features' encoders",
    "--base-model": "rmeval features' hidden-state probe's base model",
    "--n-topics": "topic clusters",
    "--judge-items": "profile the checkpoint as a judge on this items table",
    "--judge-attribute-names": "the attributes of that profile, by name",
    "--ties": "how a tied pair counts",
    # suitability
    "--suitability": "add the suitability audit",
    "--suitability-data": "the suitability audit's preference set",
    "--perturbations": "perturbation codes",
    "--max-items": "the first N preference items",
    "--base-level": "RM-Bench style level of the base pairs",
    "--n-permutations": "sign-flip permutations",
    "--q": "FDR level",
    "--eta": "Storey threshold",
    "--alpha": "level of the panel rule",
    "--weighting": "null share of each group",
    "--null-share": "fixed null shares",
    "--metric": "the confidence tested",
    "--no-robustness": "skip the robustness tests",
    "--procedure": "whose decisions the report shows",
    "--judge-style": "a generative judge's prompt",
    "--judge-explain-tokens": "tokens of a judge's explanation",
    "--groups": "groups of codes outside the ten",
    "--rewriter": "the model rewriter",
    "--language": "target language of LC and SLC",
    # variants
    "--task": "paraphrases or related tasks",
    "--generator": "the variants' generator",
    "--validity-judge": "the paraphrases' validity judge",
    "--subtype": "related-task subtype",
    "--n": "variants per prompt",
    "--threshold": "validity threshold",
    # judges analyze and reweight
    "--donor": "donor judge of the swaps",
    "--n-splits": "half splits",
    "--null-repeats": "repetitions of the null",
    "--min-shared-attributes": "shared attributes of a no-conflict case",
    "--min-n-source": "comparisons a source needs",
    "--min-n-pooled": "comparisons pooled sources need",
    "--budgets": "label budgets",
    "--n-repeats": "label draws per budget",
    "--top-k": "attributes kept in the sparse refits",
    "--baselines": "which baselines",
    "--baseline-model": "the baselines' model",
    "--baseline-judge": "the judge the baselines' model is",
    "--rubric-k": "attributes the rubric names",
    "--lora-budget": "LoRA SFT labels",
    "--lora-steps": "LoRA SFT steps",
    "--lora-lr": "LoRA SFT learning rate",
    "--lora-batch-size": "LoRA SFT batch size",
    # the reward server
    "--host": "bind address",
    "--port": "port",
    "--max-batch-tokens": "the server's tokens per forward",
    "--max-batch-items": "the server's texts per forward",
    "--batch-wait-ms": "how long a batch waits for requests",
    "--max-body-bytes": "largest request body",
    "--request-timeout": "seconds to send a request",
}

# names that a concept of the table must not go by anywhere (the old names are hidden aliases)
OTHER_NAMES = {
    "--out": ("--output-dir", "--output", "--out-dir", "--output-root", "--outdir"),
    "--set": ("--override", "--overrides"),
    "--attributes": ("--attributes-file", "--attribute-file", "--inventory"),
    "--config": ("--recipe",),
    "--seed": ("--random-seed",),
    "--force": ("--overwrite", "--retrain"),
    "--n-boot": ("--n-bootstrap", "--bootstrap"),
    "--max-prompts": ("--n-prompts", "--num-prompts"),
    "--dtype": ("--torch-dtype",),
}

# every renamed flag: old name -> new name, in the commands that had it
RENAMED = {
    "--output-dir": ("--out", {"rmtrain train", "rmtrain sweep", "rmtrain policy"}),
    "--attributes-file": ("--attributes", {"rmeval judges analyze", "rmeval judges reweight"}),
    "--judge-attributes": ("--judge-attribute-names", {"rmeval audit"}),  # names: --attributes is a file
    "--reliability": ("--human-reliability", {"rmeval human"}),  # as rmeval audit and stats call it
    "--slurm-partition": ("--partition", {"rmeval judges elicit"}),  # as rmeval reproduce calls it
}


def _visible(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.dest != "help" and a.help != argparse.SUPPRESS]


def test_every_flag_of_both_tools_is_in_the_vocabulary():
    used = {f for p in COMMANDS.values() for f in parser_flags(p)}
    assert used == set(VOCABULARY), (sorted(used - set(VOCABULARY)), sorted(set(VOCABULARY) - used))


def test_each_concept_has_one_name():
    by_concept = defaultdict(set)
    for flag, concept in VOCABULARY.items():
        by_concept[concept].add(flag)
    assert {c: f for c, f in by_concept.items() if len(f) > 1} == {}
    used = {f for p in COMMANDS.values() for f in parser_flags(p)}
    for flag, others in OTHER_NAMES.items():
        assert flag in used and not set(others) & used, flag


def test_no_command_has_two_visible_flags_for_one_field():
    for name, p in COMMANDS.items():
        actions = _visible(p)
        dests = [a.dest for a in actions]
        assert len(dests) == len(set(dests)), name
        for a in actions:  # one spelling shown per flag: an old spelling is hidden (renamed_flags)
            assert len(a.option_strings) <= 1, (name, a.option_strings)
        hidden = {s for a in p._actions if a.help == argparse.SUPPRESS for s in a.option_strings}
        assert hidden == set(renamed_flags(p)), name


def test_every_option_has_help_text():
    for name, p in COMMANDS.items():
        for a in _visible(p):
            assert isinstance(a.help, str) and len(a.help.strip()) >= 8, (name, a.option_strings or a.dest)


def test_recipe_overrides_are_one_per_flag_everywhere():
    with_set = {name for name, p in COMMANDS.items() if "--set" in parser_flags(p)}
    assert with_set == {"rmeval pool", "rmeval leaderboard", "rmtrain train", "rmtrain sweep", "rmtrain policy",
                        "rmtrain policy-eval", "rmtrain filter-experiment"}
    for name in with_set:
        (a,) = [a for a in COMMANDS[name]._actions if a.option_strings == ["--set"]]
        assert isinstance(a, AppendEach) and a.metavar == "KEY=VALUE", name
        assert "--set KEY=VALUE" in COMMANDS[name].format_help() and "KEY=VALUE [" not in COMMANDS[name].format_help()


def test_the_renamed_flags_are_the_table_of_renames():
    found = defaultdict(set)
    for name, p in COMMANDS.items():
        for old, new in renamed_flags(p).items():
            found[old, new].add(name)
    assert dict(found) == {(old, new): where for old, (new, where) in RENAMED.items()}

# the flags each command needs to parse, the files missing (a cheap path: a one-line error, exit 2)
REQUIRED = {
    "rmtrain train": ["--config", "missing.yaml"],
    "rmtrain sweep": ["--config", "missing.yaml"],
    "rmtrain policy": ["--config", "missing.yaml", "--reward-model", "rm", "--environment", "clean"],
    "rmeval judges analyze": ["--judgments", "missing.jsonl", "--out", "o"],
    "rmeval judges reweight": ["--judgments", "missing.jsonl", "--items", "missing.jsonl", "--out", "o"],
    "rmeval audit": ["--checkpoint", "missing", "--data", "missing.json", "--out", "o"],
    "rmeval human": ["--data", "missing.json", "--out", "o"],
    "rmeval judges elicit": ["--items", "missing.jsonl", "--model", "missing", "--out", "o"],
}
VALUE = {"--reliability": "a=0.5", "--judge-attributes": "a,b"}  # a value each flag reads (default "x")
CASES = [(old, new, name) for old, (new, where) in RENAMED.items() for name in sorted(where)]


@pytest.fixture
def fresh_notices(monkeypatch):
    monkeypatch.setattr("rmcore.settings.fields._WARNED", set())  # the notices are printed once per process


@pytest.mark.parametrize(("old", "new", "command"), CASES)
def test_an_old_name_reads_onto_the_new_field_and_warns_once(old, new, command, tmp_path, monkeypatch, capsys,
                                                             fresh_notices):
    monkeypatch.chdir(tmp_path)
    p = COMMANDS[command]
    value = VALUE.get(old, "x")
    assert p.parse_args([*REQUIRED[command], old, value]) == p.parse_args([*REQUIRED[command], new, value])
    tool, *words = command.split()
    main = rmeval_main if tool == "rmeval" else rmtrain_main
    for _ in range(2):
        assert main([*words, *REQUIRED[command], old, value]) == 2  # the missing file: one line, exit 2
    err = capsys.readouterr().err.splitlines()
    notice = f"{tool}: {old} is now {new} (the old name still works)"
    assert err.count(notice) == 1 and len([e for e in err if e.startswith(f"{tool}: error: ")]) == 2, err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("command", ["rmeval pool", "rmeval leaderboard", "rmtrain filter-experiment"])
def test_the_old_several_values_after_one_set_still_read(command, tmp_path, monkeypatch, capsys, fresh_notices):
    monkeypatch.chdir(tmp_path)
    p = COMMANDS[command]
    old = p.parse_args(["--config", "missing.yaml", "--set", "a=1", "b=2", "--set", "c=3"])
    assert old == p.parse_args(["--config", "missing.yaml", "--set", "a=1", "--set", "b=2", "--set", "c=3"])
    assert old.overrides == ["a=1", "b=2", "c=3"]
    tool = command.split()[0]
    assert capsys.readouterr().err == f"{tool}: --set a=1 b=2 is now --set a=1 --set b=2 (the old form still works)\n"


def test_arm_lists_the_arms_of_the_registry():
    from rmtrain.arms import ARMS

    # the names --arm lists are the registry's (no second list of them: ARMS defers the built-ins,
    # so --help reads their names without importing torch)
    listed = ARMS.names()
    shipped = [n for n, cls in ARMS.items() if cls.__module__.startswith("rmtrain.arms.")]
    assert sorted(listed) == sorted(shipped) and len(shipped) == 6
    (arm,) = [a for a in COMMANDS["rmtrain train"]._actions if a.option_strings == ["--arm"]]
    assert all(n in arm.help for n in shipped)
    assert f"the arm to train: {', '.join(listed)} or one registered" in arm.help


PLACEMENT = {"--device", "--dtype", "--attn-implementation", "--trust-remote-code", "--device-map"}


def _named(text: str) -> set[str]:
    """The commands a stretch of the README names in backticks (``rmtrain policy``, ``pairwise``)."""
    names = {re.sub(r"^(rmeval|rmtrain) ", "", n) for n in re.findall(r"`([a-z][a-z -]*)`", text)}
    return {n for n in names if n in {c.split(" ", 1)[1] for c in COMMANDS}}


def test_the_readme_says_which_commands_take_the_placement_flags():
    """The README's placement sentence, clause by clause, against the parsers: the commands taking
    all five flags, those taking two, one, and the model-loading ones taking none."""
    short = {c.split(" ", 1)[1]: PLACEMENT & parser_flags(p) for c, p in COMMANDS.items()}
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    m = re.search(r"The placement flags are (.*?) each report records where the model ran", readme)
    assert m, "the README's placement sentence"
    text = m.group(1)
    five, rest = text.split(" take all five;")
    two, rest = rest.split(" take `--device` and `--dtype`;")
    one, none = rest.split(" takes `--device`")
    assert _named(five) == {c for c, f in short.items() if f == PLACEMENT}
    assert _named(two) == {c for c, f in short.items() if f == {"--device", "--dtype"}}
    assert _named(one) == {c for c, f in short.items() if f == {"--device"}}
    assert _named(none) == {"train", "sweep", "pool", "leaderboard", "filter-experiment"}
    assert all(not short[c] for c in _named(none))
