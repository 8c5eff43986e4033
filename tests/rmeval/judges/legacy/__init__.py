"""JudgeProfile's analysis as it stood before the judgment store and the Gram-matrix pair statistics:
``panel``, ``analysis``, ``agreement_controls``, ``priority_controls`` and ``reweight`` copied from
``rmeval/judges/`` at commit ea5a952, verbatim except that imports of the attribute inventory point
at the package and what ``analyze`` and ``reweight`` do not reach (the Markdown renderers) is left
out. The independent reference ``test_judges_store_equivalence`` compares the package against,
number for number; not used anywhere else."""
