"""Reproduction of the three studies' published tables (``rmeval reproduce``).

One recipe per published table (``recipes/reproduce/*.yaml``, ``rmeval.reproduce.recipe``) names the
models as Hub ids (the revision where the paper gives one) with the loader and head of each, the
data, the conditions, precision and batch/token limits, and carries the published figures it
reproduces, transcribed with table, row, column and the paper's interval. One command runs the
table's rows (``runner``; locally one after another, or a submitit job array on SLURM, ``array``),
the panel step (``analyses``: the existing audit, pairwise, suitability, policy and JudgeProfile
pipelines), and writes the table in the paper's layout with published, ours and difference cells
(``table``). ``--dry-run`` prints each model's loader, head, GPU memory and texts without
downloading anything (``plan``); ``--stand-in`` maps every Hub id to a tiny local model of the same
kind and the data to local files (``standins``), so every recipe runs on a CPU.

Modules: ``recipe`` (the recipe's dataclasses), ``settings`` (its analysis settings), ``plan``, ``context``
(one run: paths, data, models), ``analyses`` (rows and panels per kind of table), ``judges`` and ``policy``
(JudgeProfile's and the PPO table's steps), ``figures`` and ``table`` (cells and the paper-layout table),
``runner``, ``array`` and ``worker`` (execution), ``cluster`` (placement, time limits, SLURM
settings, task scripts), ``serve`` (a task's own judge server: free port, health wait), ``hub``
(gated models, unpinned and guessed Hub ids), ``sources`` (local data sources and what to fetch),
``costing`` (GPU hours), ``standins``, ``endpoint_judge`` (a judge behind an OpenAI-compatible
endpoint, read as the expected digit)."""

RECIPES_DIR = "recipes/reproduce"
