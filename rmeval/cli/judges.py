"""``rmeval judges elicit|analyze|reweight``: LLM-judge profiling (rmeval.judges.pipeline, its
settings rmeval.judges.settings).

    rmeval judges elicit  --out OUT (--items FILE | --data SPEC ...)
                          (--model PATH | --endpoint URL --endpoint-model NAME)
                          [--attribute-names core,...] [--attributes FILE [--extend-attributes]]
                          [--n-shards N [--shard I] [--executor none|local|slurm|debug]] [--table judgments.jsonl]
    rmeval judges analyze --judgments STORE|FILE --out OUT [--items FILE] [--null-repeats 20] [--donor JUDGE]
    rmeval judges reweight --judgments STORE|FILE --items FILE --out OUT [--baseline-model PATH --baseline-judge NAME]

Each subcommand's flags are the fields of its settings: ``ElicitSettings``, ``AnalyzeCommand``
(``AnalysisSettings``), ``ReweightCommand`` (``ReweightSettings``, ``BaselineSettings``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.io.markdown import num
from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option, output_folder
from rmeval.cli.flags import wandb_flags
from rmeval.judges.settings import AnalysisSettings, BaselineSettings, ElicitSettings, ReweightSettings


@dataclass
class AnalyzeCommand:
    """``rmeval judges analyze``'s settings: the judgments, the output, and what is computed."""

    judgments: str = option("", required=True, help="judgment store (rmeval judges elicit's) or a "
                                                    "long judgments table (jsonl/parquet)")
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    items: str | None = option(None, help="items table with reference labels: adds the difficulty strata and the "
                                          "attribute-label associations")
    analysis: AnalysisSettings = nested(AnalysisSettings)
    wandb: WandbFlags = wandb_flags()


@dataclass
class ReweightCommand:
    """``rmeval judges reweight``'s settings: the judgments, the labelled items, the output, the
    refits, and the baselines (``--baselines`` turns them on; they share the refits' seed)."""

    judgments: str = option("", required=True, help="judgment store (rmeval judges elicit's) or a "
                                                    "long judgments table (jsonl/parquet)")
    items: str = option("", required=True, help="items table with reference labels")
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    reweight: ReweightSettings = nested(ReweightSettings)
    baselines: BaselineSettings | None = nested(BaselineSettings, when="kinds")
    wandb: WandbFlags = wandb_flags()

    def __post_init__(self) -> None:
        if self.baselines is not None:
            self.baselines.seed = self.reweight.seed


def add_parser(sub: argparse._SubParsersAction) -> None:
    j = sub.add_parser("judges", help="profile LLM judges: elicit attribute judgments, analyze, reweight")
    js = j.add_subparsers(dest="judges_command", required=True)
    add_command(js, "elicit", ElicitSettings, run_elicit,
                help="attribute and overall judgments in both presentation orders")
    add_command(js, "analyze", AnalyzeCommand, run_analyze,
                help="agreement, consistency, position bias, priority weights and the JudgeProfile controls")
    add_command(js, "reweight", ReweightCommand, run_reweight,
                help="refit attribute weights to reference labels per source")


def run_elicit(cfg: ElicitSettings) -> int:
    # numpy, pandas: --help reads the settings alone
    from rmeval.judges.pipeline import run_elicit as elicit_judgments

    cfg.placement.validate()  # malformed device flags fail here; the device itself is resolved where the judge runs
    s = elicit_judgments(cfg)
    skipped = sum(n for by_reason in s["rows_skipped"].values() for n in by_reason.values())
    print(f"elicited {s['n_cells']} calls ({s['n_made']} asked now, {s['n_cached']} from the cache; "
          f"{s['n_unresolved']} unresolved, {s['n_malformed']} malformed"
          + (f"; {skipped} data rows skipped, by source and reason in elicit_stats.json" if skipped else "")
          + f") -> {s.get('judgments', cfg.out)}")
    return 0


def run_analyze(s: AnalyzeCommand) -> int:
    import sys
    from pathlib import Path

    # numpy, pandas, matplotlib: --help reads the settings alone
    from rmeval.judges.pipeline import analyze_judgments
    from rmeval.judges.plots import plots_not_drawn

    res = analyze_judgments(s.judgments, s.out, items=s.items, settings=s.analysis, **s.wandb.target())
    for note in plots_not_drawn(res):
        print(note, file=sys.stderr)
    ag = res["agreement"]

    def f(x: float | None) -> str:
        return num(x, missing="n/a")

    line = (f"{len(res['judges'])} judges: overall agreement {f(ag['overall'])}, attribute agreement "
            f"{f(ag['attribute'])} (coverage {f(ag['attribute_coverage'])})")
    null = res.get("identical_preference_null")
    if null:
        line += (f"; weight SD above the identical-preference null on {null['n_attributes_exceeding']} of "
                 f"{null['n_attributes']} attributes")
    print(f"{line} -> {Path(s.out) / 'analysis.json'}")
    return 0


def run_reweight(s: ReweightCommand) -> int:
    from pathlib import Path

    # numpy, pandas: --help reads the settings alone
    from rmeval.judges.pipeline import reweight_judgments
    from rmeval.judges.reweight import gain_line

    res = reweight_judgments(s.judgments, s.items, s.out, s.reweight, baselines=s.baselines, **s.wandb.target())
    for j, jr in res["judges"].items():
        if jr["mean_gain"] is not None:
            n = sum(r.get("gain") is not None for r in jr["sources"].values())
            print(gain_line(f"{j} (mean over {n} sources)", jr))
    sm = res["summary"]
    if sm["n_cells"]:
        print(gain_line(f"all judges (mean over {sm['n_cells']} judge-source cells)", sm)
              + f"; {sm['n_judges_improved']} of {sm['n_judges']} judges improve")
    print(f"-> {Path(s.out) / 'reweight.json'}")
    return 0
