"""Policy training against a reward model (the wiring layer: may import rmeval, never the reverse).

``train_policy`` (grpo / rloo through trl, ppo through OpenRLHF), the clean and perturbed
environments, and ``evaluate_policies`` (win rate of the perturbed policy over the clean one, and
the Spearman table across reward models)."""

from rmtrain.policy.config import PolicyConfig, load_policy_config, policy_config_from_dict

__all__ = ["PolicyConfig", "load_policy_config", "policy_config_from_dict"]
