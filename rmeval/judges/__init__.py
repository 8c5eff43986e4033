"""LLM-judge profiling (JudgeProfile): attribute perception, prioritization and reweighting.

- ``inventory``: the attribute inventory (shipped YAML, user-extensible);
- ``elicit``: pairwise attribute/verdict elicitation in both presentation orders (local causal LM
  with prefix KV-cache reuse, or an OpenAI-compatible endpoint), sharded, cached and resumable;
- ``analysis``: agreement between judges, order consistency, position bias, priority fits;
- ``reweight``: refitting attribute weights to reference labels, with label budgets and top-k;
- ``baselines``: rubric prompting and LoRA SFT of a local judge under the same budgets.
"""
