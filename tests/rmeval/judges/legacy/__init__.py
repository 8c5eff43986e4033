"""Today's JudgeProfile analysis as it stood before the judgment store and the Gram-matrix pair
statistics (commit ea5a952): ``panel``, ``analysis``, ``agreement_controls``,
``priority_controls`` and ``reweight`` copied verbatim (imports of the attribute inventory pointed
at the package). The reference ``test_judges_store_equivalence`` compares the package against,
number for number; not used anywhere else."""
