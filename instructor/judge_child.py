"""The judge: measures the policies that the gates saved, in a tree that holds no student file.

    python -I TREE/judge_child.py TREE JOBS SCORES

Run by the outcome gates (:mod:`instructor.gate`, through :func:`instructor.children.run_child`) from its
copy in TREE: a fresh package copy with no student file in its ``rl/``, the training scripts and the tiny
assets. JOBS lists the saved policies (weights only: safetensors, or the lecture's tensor-only state
dict; gate/best_of_n: its curves, gate/online: its picks and agreements, tensors only); SCORES gets {gate name: the measured number, or the error's
text}: the mean sentiment reward of the tiny preset's replies to fixed prompts sampled with a fixed seed
(gate/after_grpo: the mean sort reward of the sort task's tiny model; the lecture: the held-out exact-sort
accuracy; a reward model: its accuracy on the judge's own preference pairs; gate/best_of_n: the share of the
curves' numbers that agree with the judge's own; gate/online: the share of its picks and agreements equal to the
judge's). It imports nothing of ``instructor`` (not there in the
child's tree) and ``rlhf_practice`` only from TREE; gate/best_of_n's pool and curves come from the copy of
``gate_child.py`` in TREE (the grader's program, no student file).
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
            judges = {"lecture": _lecture, "rm": _reward_model, "best_of_n": _best_of_n, "online": _online}
            judge = judges.get(job["kind"], _task_reward)
            scores[job["name"]] = judge(job)
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


def _task_reward(job: dict) -> float:
    """The mean reward of the saved tiny policy's replies to job["prompts"] prompts of the task job["kind"]
    ("sentiment", or "sort": the sort task's own tiny model and reward), sampled with job["seed"]."""
    import torch

    from rlhf_practice.config import GRPOConfig, preset_config
    from rlhf_practice.modeling import PolicyValueModel
    from rlhf_practice.sampling import Sampler
    from rlhf_practice.tasks import build_task
    from rlhf_practice.training import seed_everything

    config = preset_config(GRPOConfig, "tiny", task=job["kind"])
    task = build_task(config)
    tokenizer = task.load_tokenizer()
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


REPLIES_PER_PROMPT = 4  # the judge's pairs: as train_reward_model.py's defaults build them ("all" pairs of 4)


def _reward_model(job: dict) -> float:
    """The held-out pair accuracy of a saved reward model (GPT2ForSequenceClassification, one label, the
    tiny preset's size): REPLIES_PER_PROMPT replies of the tiny starting policy to each of job["prompts"]
    prompts, sampled with job["seed"] (never a training seed) and ranked by the sentiment reward (ties
    dropped) by train_reward_model.py's own loop (rlhf_practice.preferences.sample_pairs), each reply scored
    at its last real token (by the attention mask; the key's get_reward, written out here: this tree holds
    no rl/ file). The share of pairs whose chosen reply scores higher."""
    import torch

    from rlhf_practice.config import RewardModelConfig, preset_config
    from rlhf_practice.learned_reward import LearnedReward, check_reward_model
    from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
    from rlhf_practice.preferences import PairData, sample_pairs
    from rlhf_practice.sampling import Sampler
    from rlhf_practice.tasks import build_task
    from rlhf_practice.training import seed_everything

    config = preset_config(RewardModelConfig, "tiny")
    task = build_task(config)
    tokenizer = load_tokenizer("tiny")
    model = LearnedReward.load(check_reward_model(job["path"], "sentiment"), tokenizer, torch.device("cpu")).model
    if sum(p.numel() for p in model.parameters()) > 2_000_000:  # (one label: check_reward_model)
        raise ValueError("not a reward model of the tiny preset's size")
    policy = PolicyValueModel.from_pretrained("tiny", "cpu")
    sampler = Sampler.from_config(policy, tokenizer, config)

    def score(generation, prompts: list[str]) -> tuple[list[str], torch.Tensor]:
        replies = generation.decode(tokenizer)
        return replies, task.reward(prompts, replies)

    seed_everything(job["seed"])
    batches = task.prompt_batches(tokenizer, 32, job["seed"])
    with torch.no_grad():
        pairs, _ = sample_pairs(
            sampler.sample, score, batches, job["prompts"], REPLIES_PER_PROMPT, "all", tokenizer.eos_token_id,
            torch.device("cpu"),
        )  # fmt: skip
        rows = PairData(pairs, tokenizer, policy.max_length, "judge").collate(list(range(len(pairs))))
        hidden = model.transformer(input_ids=rows.input_ids, attention_mask=rows.attention_mask).last_hidden_state
        last = rows.attention_mask.sum(dim=1) - 1
        scores = model.score(hidden).squeeze(-1).float().gather(1, last[:, None]).squeeze(1)
    chosen, rejected = scores.chunk(2)
    return float((chosen > rejected).float().mean())


def _best_of_n(job: dict) -> float:
    """The share of the numbers of gate/best_of_n's curves (the submission's functions on the pool, saved by its
    gate child) within job["tolerance"] of the judge's own: the same pool drawn here (gate_child.best_of_n_pool with
    the gate's settings) and the same curves (gate_child.best_of_n_curves) computed with the key's functions, written
    out below (this tree holds no rl/ file). The KL is compared relative to max(1, KL), the scores absolutely; a
    missing curve, a wrong shape or a NaN counts as that many numbers off."""
    import torch
    from gate_child import best_of_n_curves, best_of_n_pool

    expected = best_of_n_curves(_kl, _estimate, _ensemble, best_of_n_pool(**job["best_of_n"]))
    got = torch.load(job["path"], weights_only=True)
    matched = total = 0
    for name, want in expected.items():
        total += want.numel()
        have = got.get(name) if isinstance(got, dict) else None
        if isinstance(have, torch.Tensor) and have.shape == want.shape and have.is_floating_point():
            allowed = job["tolerance"] * (want.abs().clamp(min=1) if name == "kl" else 1)
            matched += int(((have.double() - want.double()).abs() <= allowed).sum())
    return matched / total


def _online(job: dict) -> float:
    """The share of gate/online's numbers (the submission's picks and agreements, saved by its gate child) equal to
    the judge's own: the same pairs drawn here (gate_child.online_pool) and the same outcome (gate_child.online_outcome)
    computed with the key's functions, written out below. An index counts when it is the same, an agreement when it
    is within 1e-6 (NaN where the judge's is NaN); a missing part or a wrong shape counts as that many numbers off."""
    import torch
    from gate_child import online_outcome, online_pool

    expected = online_outcome(_select, _agreement, online_pool(**job["online"]), job["online"])
    got = torch.load(job["path"], weights_only=True)
    matched = total = 0
    for name, want in expected.items():
        total += want.numel()
        have = got.get(name) if isinstance(got, dict) else None
        if not isinstance(have, torch.Tensor) or have.shape != want.shape:
            continue
        if name.startswith("picked/"):
            matched += int((have.long() == want).sum()) if not have.is_floating_point() else 0
        elif have.is_floating_point():
            both_nan = have.isnan() & want.isnan()
            matched += int((both_nan | ((have.double() - want.double()).abs() <= 1e-6)).sum())
    return matched / total


def _select(scores_a, scores_b, num_labels, selection):
    """The key's select_pairs."""
    import torch

    if selection == "random":
        return torch.arange(num_labels)
    if selection == "uncertain":
        key = (scores_a.mean(dim=0) - scores_b.mean(dim=0)).abs()
    else:
        key = -torch.sigmoid(scores_a - scores_b).var(dim=0)
    return torch.sort(key, stable=True).indices[:num_labels].sort().values


def _agreement(proxy_a, proxy_b, gold_a, gold_b):
    """The key's proxy_agreement."""
    import torch

    counted = gold_a != gold_b
    agree = torch.sign(proxy_a - proxy_b) == torch.sign(gold_a - gold_b).to(proxy_a.dtype)
    return (agree & counted).sum().to(proxy_a.dtype) / counted.sum().to(proxy_a.dtype)


def _kl(n):
    """The key's best_of_n_kl on an integer tensor: log n - (n - 1)/n, float64."""
    n = n.double()
    return n.log() - (n - 1) / n


def _estimate(proxy_scores, scores):
    """The key's best_of_n_estimate (max_n = N): tied proxy scores share their mean score, then the i-th smallest is
    kept with probability C(i - 1, n - 1) / C(N, n), in log space, in float64."""
    import torch

    batch, pool = scores.shape
    same = proxy_scores[:, :, None] == proxy_scores[:, None, :]  # (B, N, N): equal proxy scores
    tied = (same.double() @ scores.double()[:, :, None]).squeeze(2) / same.sum(dim=2)
    ranked = tied.gather(1, torch.argsort(proxy_scores, dim=1, stable=True))
    i = torch.arange(1, pool + 1, dtype=torch.float64)
    n = i[:, None]
    log_choose = lambda a, b: torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1)  # noqa: E731
    log_weights = log_choose(i - 1, (n - 1).clamp(max=i - 1)) - log_choose(torch.tensor(float(pool)), n)
    return (ranked @ torch.exp(log_weights).where(i >= n, 0.0).T).to(scores.dtype)


def _ensemble(scores, mode):
    """The key's ensemble_reward with its default uncertainty_coef 0.5."""
    if mode == "mean":
        return scores.mean(dim=0)
    if mode == "min":
        return scores.min(dim=0).values
    return scores.mean(dim=0) - 0.5 * scores.var(dim=0)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the scores are written: skip the interpreter's teardown
