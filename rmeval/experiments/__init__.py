"""Experiments around reward models: ``pool`` (a reference pool of responses scored by reward
models), ``leaderboard`` (policies ranked by raw and centred reward), ``comparisons`` (judged
pairwise comparisons), ``responses`` (policy responses), ``winrate`` (win rates and their Spearman
correlation with suitability), ``recipe`` (what their recipes share)."""
