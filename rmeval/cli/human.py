"""``rmeval human``: every ratings-only statistic of a rating set, no model (rmeval.audit.human.human_audit)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from rmcore.data.schema import skipped_note
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option, output_folder
from rmeval.audit.settings import HumanSettings


@dataclass
class HumanCommand:
    """``rmeval human``'s settings: the rating set, the output, and what is computed (``HumanSettings``)."""

    data: str = option("", required=True, help="data SPEC")
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    human: HumanSettings = nested(HumanSettings)


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "human", HumanCommand, run, help="ratings-only statistics of a rating set (no model)")


def run(s: HumanCommand) -> int:
    """OUT/human.json and OUT/human.md."""

    # the statistics (pandas, scipy): --help loads no tables
    from rmeval.audit.human import human_audit

    res = human_audit(s.data, s.human, s.out)
    main = res["meta"]["main_attribute"]
    r = res["attributes"][main]["share"]["all"]
    skipped = skipped_note(res["meta"]["skipped"])  # on_bad: skip, counted
    print(f"{res['meta']['rating_set']}: {main} share {r['estimate']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] "
          f"on {r['n_prompts']} prompts" + (f" (skipped: {skipped})" if skipped else "")
          + f" -> {Path(s.out) / 'human.md'}")
    return 0
