"""``rmeval`` console script: score + audit checkpoints, recompute an audit from tables, and
pairwise accuracy on preference sets. Thin: every step is a library call.

    rmeval audit --checkpoint DIR --data SPEC --out OUT [--conditions original generic ...]
                 [--related-file F] [--paraphrase-file F] [--max-prompts N] [--batch-size 32]
                 [--max-length 2048] [--n-boot 2000] [--wandb-mode offline|online|disabled] [--seed 0]
    rmeval stats --scores FILE --ratings FILE --out OUT [--preferences FILE] [--features DIR]
                 [--compare-scores NAME=FILE ...]
    rmeval features --data SPEC --out DIR [--embedders MODEL ...] [--base-model MODEL]
    rmeval pairwise --checkpoint DIR --data SPEC --out OUT [--ties half|wrong]
    rmeval judges elicit|analyze|reweight ...   (LLM-judge profiling; see rmeval.cli.judges)
    rmeval human --data SPEC --out OUT [--annotations FILE --raters-per-rating 3] [--human-reliability NAME=R ...]
    rmeval suitability --checkpoint DIR --data SPEC --out OUT [--perturbations EF PH ... SP@rmbench]
                       [--rewriter hf:MODEL|openai:MODEL|file:PATH] [--n-permutations 10000] [--q 0.05]
                       [--eta 0.5] [--margin M]
    rmeval suitability-stats --pairs FILE --out OUT [--groups CODE=GROUP ...]
    rmeval variants --data SPEC --task paraphrase|related --out FILE [--generator simulated|hf:M|openai:M]
                    [--subtype different|contains|sub_question] [--validity-judge hf:M|openai:M]
    rmeval serve-reward --checkpoint DIR [--host 127.0.0.1] [--port 5000]
    rmeval reproduce RECIPE [--out OUT] [--dry-run] [--stand-in] [--only ROW ...] [--executor local|slurm]

SPEC: a JSON/YAML data-spec file, a JSON string, or a short form ``simulated``,
``simulated:n_prompts=100,seed=3``, ``rm_bench:/path/chat_filtered.json``, ``helpsteer2:validation``
(``rmcore.data.loading.parse_data_spec``).
If DIR holds several checkpoints (subdirectories with config.json: checkpoint-*/, arm dirs), each is
audited into OUT/<name>/ and a comparison is written to OUT/summary.md and OUT/summary.json.
Every path given is checked first: a missing, empty or wrong-kind path is a one-line error. A
--checkpoint that is not a local path and looks like a Hub id (owner/name) is loaded from the Hub.

One module per command (``rmeval.cli.<command>``), each with ``add_parser(subparsers)``: the command's
settings are one dataclass whose fields declare its flags (``rmcore.settings.fields``; shared pieces in
``rmeval.cli.flags``), registered with its ``run`` by ``rmcore.settings.commands.add_command``; ``main`` is
``rmcore.settings.commands.run_main``, as ``rmtrain``'s: it reads the settings back, and ``run`` takes them,
makes one library call and prints its one-line result.
"""

from __future__ import annotations

import argparse

from rmcore.settings.commands import run_main
from rmcore.settings.fields import Parser
from rmeval.cli import (
    audit,
    features,
    human,
    judges,
    leaderboard,
    pairwise,
    pool,
    reproduce,
    serve_reward,
    stats,
    suitability,
    variants,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rmeval", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (audit, stats, features, pairwise, human, suitability, variants, judges, serve_reward, pool,
                    leaderboard, reproduce):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_main("rmeval", build_parser(), argv)
