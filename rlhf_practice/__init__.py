"""rlhf_practice: implement RL for language models yourself: PPO, GRPO, token-level RLHF (per-token KL,
GAE, token-level PPO and GRPO-clip), the sorting lecture's verifiable rewards, and DPO.

The modules, in the order a training step uses them:
``config`` (settings) -> ``tasks`` (what is trained on: prompts from ``data``, the reward of
``reward``, the model) -> ``sampling`` (replies) -> ``modeling`` (the policy: log-probs, values)
-> ``rl`` (advantages and losses, the student files)
-> ``tracking`` (TensorBoard, metrics.csv, samples). ``training`` sets a run up and closes it;
``course`` says which functions are graded and loads the implementation named by ``--impl``.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ASSETS_DIR = PACKAGE_DIR / "assets"
