"""LLM-judge profiling (JudgeProfile): attribute perception, prioritization and reweighting.

- ``inventory``: the attribute inventory (shipped YAML, user-extensible);
- ``store``: the judgment store, one signed byte per judgment (an int8 array per judge with the
  item, judge and attribute vocabularies), and the long tables converted to and from it;
- ``elicit``: pairwise attribute/verdict elicitation in both presentation orders (local causal LM
  with prefix KV-cache reuse, or an OpenAI-compatible endpoint), sharded, cached and resumable;
- ``panel``: the judgments as dense arrays under the stable and single-read protocols, and the
  agreement, kappa and logistic-fit primitives every analysis shares;
- ``pairstats``: every agreement count of all judge pairs at once, as Gram matrices;
- ``workers``: the judges' logistic fits over worker processes;
- ``analysis``: agreement between judges, order consistency, position bias, priority fits, and the
  document ``analyze`` assembles with the paper's controls:
- ``agreement_controls``: single-read control, three-category kappa, matched items, the no-conflict
  subset, agreement by importance quartile and family, difficulty strata, label associations;
- ``priority_controls``: the identical-preference null with each judge's dispersion against it,
  component swaps;
- ``reweight``: refitting attribute weights to reference labels, with label budgets and top-k, the
  base accuracy by the paper's one-order rule and the stable-verdict figure beside it;
- ``baselines``: rubric prompting and LoRA SFT of a local judge under the same budgets;
- ``simulate``: simulated panels with planted perception and priorities (tests, benchmarks).
"""
