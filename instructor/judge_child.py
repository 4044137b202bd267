"""The judge: measures the policies that the gates saved, in a tree that holds no student file.

    python -I TREE/judge_child.py TREE JOBS SCORES

Run by the outcome gates (:mod:`instructor.gate`, through :func:`instructor.children.run_child`) from its
copy in TREE: a fresh package copy with no student file in its ``rl/``, the training scripts and the tiny
assets. JOBS lists the saved policies (weights only: safetensors, or the lecture's tensor-only state
dict); SCORES gets {gate name: the measured number, or the error's text}: the mean sentiment reward of
the tiny preset's replies to fixed prompts sampled with a fixed seed (the lecture: the held-out exact-sort
accuracy). It imports nothing of ``instructor`` (not there in the child's tree) and ``rlhf_practice`` only
from TREE.
"""

import os
import sys


def main(argv: list[str]) -> None:
    tree, jobs_path, scores_path = argv
    sys.path.insert(0, tree)  # the package copy: before anything is imported
    import torch

    jobs = torch.load(jobs_path, weights_only=True)
    scores = {}
    for job in jobs:
        try:
            scores[job["name"]] = _lecture(job) if job["kind"] == "lecture" else _sentiment(job)
        except BaseException as err:
            scores[job["name"]] = f"{type(err).__name__}: {err}"[:200]
    torch.save(scores, scores_path)


def _lecture(job: dict) -> float:
    """The held-out exact-sort accuracy of the lecture's saved model."""
    import torch

    from rlhf_practice import lecture

    config = lecture.LectureConfig(**job["lecture"])
    model = lecture.Model(config.vocab_size, config.embedding_dim, config.n, config.n)
    model.load_state_dict(torch.load(job["path"], weights_only=True))
    return float(lecture.exact_sort_accuracy(lecture.heldout_prompts(config), model))


def _sentiment(job: dict) -> float:
    """The mean reward of the saved tiny policy's replies to job["prompts"] prompts, sampled with job["seed"]."""
    import torch

    from rlhf_practice.config import GRPOConfig, preset_config
    from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
    from rlhf_practice.sampling import Sampler
    from rlhf_practice.tasks import build_task
    from rlhf_practice.training import seed_everything

    config = preset_config(GRPOConfig, "tiny")
    task = build_task(config)
    tokenizer = load_tokenizer("tiny")
    policy = PolicyValueModel.from_pretrained(job["path"], "cpu")
    if type(policy.lm).__name__ != "GPT2LMHeadModel" or sum(p.numel() for p in policy.lm.parameters()) > 2_000_000:
        raise ValueError("not the tiny preset's model")
    sampler = Sampler.from_config(policy, tokenizer, config)
    seed_everything(job["seed"])
    batches = task.prompt_batches(tokenizer, 64, job["seed"])
    rewards = []
    for _ in range(job["prompts"] // 64):
        batch = next(batches)
        generation = sampler.sample(batch["input_ids"], batch["attention_mask"])
        rewards.append(task.reward(batch["prompt_text"], generation.decode(tokenizer)))
    return float(torch.cat(rewards).mean())


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the scores are written: skip the interpreter's teardown
