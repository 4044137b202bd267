"""The student files: ``ppo.py`` (tasks 1-2), ``grpo.py`` (task 3), ``token_level.py`` (tasks 7-9),
``lecture.py`` (task 10, the lecture's GRPO on sorting), ``dpo.py`` (task 12, DPO), ``reward_model.py`` (task 13,
a reward model learned from preferences), ``after_grpo.py`` (task 14: RLOO, clip-higher, GSPO, CISPO, dynamic
sampling), ``best_of_n.py`` (task 15: best-of-n's KL and expected score, reward-model ensembles) and ``online.py``
(task 16: which fresh pairs get labels, and the detector of over-optimization). See TASKS.md.

Whose functions a script or test runs (yours here, or a copy of this folder elsewhere) is chosen with
``--impl``; :mod:`rlhf_practice.course` does that, so nothing else lives here.
"""
