"""Online RLHF (task 16): the reward model refreshed with fresh labels of what the policy writes now.

``train_ppo.py`` and ``train_grpo.py`` with ``--reward_model DIR --online.refresh_every K``: at the start of
steps K + 1, 2K + 1, ... (at most ``online.max_refreshes`` times) the loop calls :meth:`OnlineLabels.refresh`,
which

1. samples ``labels_per_refresh * candidates_per_label`` fresh pairs (``labels_per_refresh`` for a random
   selection) from the *current* policy: two replies to
   each of as many new prompts (their own prompt stream, :data:`ONLINE_SEED_OFFSET`; the run's random numbers
   are forked, so the rest of the run draws what it would have drawn without the refresh);
2. scores both replies of every candidate with each reward model of the run (normalised as the run reads them)
   and picks ``labels_per_refresh`` of them to send to the annotator (:func:`select_pairs`, ``online.selection``:
   the first ones -- the candidates are a random sample --, the ones the proxy is least sure about, or those the
   models of an ensemble dispute most) -- the implementation's ``select_pairs`` (rl/online.py, TASKS.md §16.2);
3. asks the annotator -- the task's own reward with the run's ``--reward.*`` settings, the gold -- which reply of
   each chosen pair it prefers. Each pair shown costs one label (``labels/online``; ``labels/total`` adds the
   pairs the reward model was first trained on, from its reward_model.json), a tie too, which then makes no pair;
4. logs the detector that needs no gold beyond those labels: ``online/proxy_accuracy``, how often the reward
   the run trains on ordered the labelled pairs as the annotator did, *before* it learns from them. Where the
   policy writes what the reward model learned to judge, that is its held-out accuracy (TASKS.md §15.4); once
   the policy exploits the proxy's mistakes, it falls toward chance and below (the implementation's
   ``proxy_agreement``, TASKS.md §16.3);
5. refreshes every reward model of the run: ``rm_steps`` Adam steps (batches of ``rm_batch_size`` pairs) of the
   implementation's ``get_reward`` and ``reward_loss`` on every pair so far (the model's own training pairs,
   its ``train_pairs.jsonl``, and every labelled pair of this run: ``online.replay``), or on this refresh's
   pairs only (``--online.no_replay``: such a model forgets what it learned before). The score's
   normalisation stays the one of reward_model.json. ``--online.retrain``: each refresh starts a new model instead
   (the starting policy's trunk and a new head, as train_reward_model.py starts; kept from the start of the
   run). ``--online.rm_steps 0`` trains nothing: the labels then
   only audit the static reward model (steps 1-4), and the run trains exactly as without them.

The annotator's score enters the update only through the refreshed reward model; the run's ``reward/gold`` is
still only logged. Everything here runs on the main (only) process: online RLHF is refused under a launcher.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import torch

from rlhf_practice.course import raised
from rlhf_practice.errors import ConfigError, TrainingError
from rlhf_practice.preferences import PairData, rank_pairs, read_pairs, reward_model_from_policy, reward_step

if TYPE_CHECKING:
    from rlhf_practice.config import OnlineConfig
    from rlhf_practice.learned_reward import RewardEnsemble
    from rlhf_practice.modeling import Generation
    from rlhf_practice.training import TrainingRun

ONLINE_SEED_OFFSET = 2**34
"""The refreshes' prompts are drawn with seed + this: neither the training prompts (seed), the warm-up's
(seed + 2**32) nor the preference pairs' (seed + 2**33)."""
PROMPTS_PER_CALL = 64  # prompts per sampling call (each sampled twice)


class OnlineLabels:
    """The refreshes of a run (see the module docstring): its labelled pairs, its label count, its reward models."""

    def __init__(self, run: TrainingRun, reward: RewardEnsemble):
        self.run = run
        self.settings = run.config.online
        self.reward = reward
        self.prompts = run.task.prompt_batches(run.tokenizer, PROMPTS_PER_CALL, run.config.seed + ONLINE_SEED_OFFSET)
        self.initial_labels = sum(int(m.folder.record.get("num_pairs", 0)) for m in reward.members)
        self.online_labels = 0
        self.refreshes = 0
        self.labelled: list[dict] = []  # every pair this run's annotator ordered (ties left out)
        self.own_pairs: list[list[dict]] = []  # each model's training pairs (replay), read once
        if self.settings.replay:
            for member in reward.members:
                path = member.folder.path.parent / "train_pairs.jsonl"
                if not path.is_file():
                    raise ConfigError(
                        f"online.replay: {member.folder.name} has no train_pairs.jsonl beside it (train_reward_model.py "
                        "writes it into the run folder), so its first pairs cannot be trained on again; give the "
                        "reward_model folder of a train_reward_model.py run, or --online.no_replay."
                    )
                self.own_pairs.append(read_pairs(path, "online.replay"))
        self.starts: list[dict[str, torch.Tensor]] = []  # --online.retrain: each model's starting weights
        if self.settings.retrain:
            for member in reward.members:
                with torch.random.fork_rng(devices=[]):  # the new head's draws leave the run's numbers as they were
                    start = reward_model_from_policy(
                        run.policy.lm, member.model.config.pad_token_id, member.model.config.n_layer, run.config.seed
                    )
                self.starts.append({k: v.to(run.device) for k, v in start.state_dict().items()})

    def due(self, step: int) -> bool:
        """A refresh starts step ``step``: after every ``refresh_every`` steps, at most ``max_refreshes`` times."""
        every, most = self.settings.refresh_every, self.settings.max_refreshes
        return step > 1 and (step - 1) % every == 0 and (most == 0 or self.refreshes < most)

    def metrics(self, step: int) -> dict[str, torch.Tensor]:
        """This step's ``labels/`` tags, and with a refresh due, the refresh's own (``online/``)."""
        found = self.refresh() if self.due(step) else {}
        device = self.run.device
        return {
            "labels/total": torch.tensor(float(self.initial_labels + self.online_labels), device=device),
            "labels/online": torch.tensor(float(self.online_labels), device=device),
            **{tag: torch.tensor(value, device=device) for tag, value in found.items()},
        }

    @torch.no_grad()
    def candidates(self) -> tuple[list[str], list[str], list[bool], torch.Tensor]:
        """C = labels_per_refresh * candidates_per_label (random: labels_per_refresh) fresh pairs of the current policy: prompt texts (2C, each
        twice), replies (2C: a_1, b_1, a_2, ...), whether each reply ended, and each model's scores (k, 2C)."""
        run, settings = self.run, self.settings
        wanted = settings.labels_per_refresh * (1 if settings.selection == "random" else settings.candidates_per_label)
        texts, replies, ended, scores = [], [], [], []
        while len(texts) < 2 * wanted:
            batch = next(self.prompts)
            n = min(len(batch["prompt_text"]), wanted - len(texts) // 2)
            input_ids = batch["input_ids"][:n].to(run.device).repeat_interleave(2, dim=0)  # (2n, P)
            attention_mask = batch["attention_mask"][:n].to(run.device).repeat_interleave(2, dim=0)
            generation: Generation = run.generate(input_ids, attention_mask)
            texts += [p for p in batch["prompt_text"][:n] for _ in range(2)]
            replies += generation.decode(run.tokenizer)
            eos = (generation.response_ids == run.tokenizer.eos_token_id) & (generation.response_mask > 0)
            ended += eos.any(dim=1).tolist()
            scores.append(torch.stack([m.score(generation, run.impl.reward_model) for m in self.reward.members]))
        return texts, replies, ended, torch.cat(scores, dim=1)

    def refresh(self) -> dict[str, float]:
        """One refresh (steps 1-5 of the module docstring). Returns its ``online/`` figures."""
        run, settings = self.run, self.settings
        devices = [run.device] if run.device.type == "cuda" else []
        with run.logger.timed("online"), torch.random.fork_rng(devices=devices):
            torch.manual_seed(run.config.seed + ONLINE_SEED_OFFSET + self.refreshes)
            texts, replies, ended, scores = self.candidates()
            picked = self.select(scores[:, 0::2], scores[:, 1::2])
            a, b = 2 * picked, 2 * picked + 1  # rows of each picked pair's two replies
            rows = torch.stack([a, b], dim=1).reshape(-1).tolist()
            gold = run.task.reward([texts[i] for i in rows], [replies[i] for i in rows]).float().view(-1, 2)
            proxy = self.reward.combine(scores[:, rows], run.impl).view(-1, 2)  # the reward the run trains on
            self.online_labels += len(picked)
            untied = gold[:, 0] != gold[:, 1]
            agreement = self.agreement(proxy[:, 0], proxy[:, 1], gold[:, 0], gold[:, 1])
            new = [  # a pair the annotator orders (a tie makes none: rank_pairs)
                pair
                for i, j, rewards in zip(a.tolist(), b.tolist(), gold.tolist())
                for pair in rank_pairs(texts[i], [replies[i], replies[j]], rewards, [ended[i], ended[j]], "all")
            ]
            self.labelled += new
            found = {
                "online/proxy_accuracy": agreement,
                "online/label_ties": 1.0 - untied.float().mean().item(),
            }
            if new and settings.rm_steps:
                found["online/rm_loss"] = self.train(new)
            self.refreshes += 1
        print(
            f"refresh {self.refreshes}: {len(picked)} labels ({len(new)} pairs, the rest ties), "
            f"proxy agreed with the annotator on {found['online/proxy_accuracy']:.3f} of them; "
            f"labels so far {self.initial_labels + self.online_labels}",
            file=sys.stderr,
        )
        return found

    def select(self, scores_a: torch.Tensor, scores_b: torch.Tensor) -> torch.Tensor:
        """(M,) the candidates to label: the implementation's ``select_pairs`` (rl/online.py, TASKS.md §16.2)."""
        settings, candidates = self.settings, scores_a.shape[1]
        try:
            picked = self.run.impl.online.select_pairs(
                scores_a, scores_b, settings.labels_per_refresh, settings.selection
            )
        except NotImplementedError:
            raise
        except Exception as err:  # the implementation's own mistake: one line, the logs so far kept
            raise raised(
                "select_pairs", err, f"picking {settings.labels_per_refresh} of {candidates} fresh pairs"
            ) from err
        picked = torch.as_tensor(picked)
        if (
            picked.shape != (settings.labels_per_refresh,)
            or picked.dtype != torch.long
            or len(set(picked.tolist())) < len(picked)
            or not all(0 <= i < candidates for i in picked.tolist())
        ):
            raise TrainingError(
                f"select_pairs returned {tuple(picked.shape)} {picked.dtype} indices, not {settings.labels_per_refresh} "
                f"different int64 indices of the {candidates} candidates (TASKS.md §16.2)."
            )
        return picked.cpu()

    def agreement(self, *scores: torch.Tensor) -> float:
        """The detector: the implementation's ``proxy_agreement`` (rl/online.py, TASKS.md §16.3) as a number."""
        try:
            found = self.run.impl.online.proxy_agreement(*scores)
        except NotImplementedError:
            raise
        except Exception as err:
            raise raised("proxy_agreement", err, "measuring the reward model on the labelled pairs") from err
        if not isinstance(found, torch.Tensor) or found.numel() != 1:
            raise TrainingError("proxy_agreement returned no 0-dim tensor: one share for the pairs (TASKS.md §16.3).")
        return float(found)

    def train(self, new: list[dict]) -> float:
        """``rm_steps`` updates of every reward model on its pairs (``replay``: its own first pairs and every
        labelled pair of the run; else ``new`` only). Returns the mean loss of the last step over the models."""
        run, settings = self.run, self.settings
        rm = run.impl.reward_model
        losses = []
        for k, member in enumerate(self.reward.members):
            pairs = self.own_pairs[k] + self.labelled if settings.replay else new
            data = PairData(pairs, run.tokenizer, run.policy.max_length, "online pairs")
            model = member.model.requires_grad_(True)
            if settings.retrain:
                model.load_state_dict(self.starts[k])
            optimizer = torch.optim.Adam(model.parameters(), lr=settings.rm_learning_rate)
            batches = data.batches(settings.rm_batch_size, run.config.seed + self.refreshes)
            for _ in range(settings.rm_steps):
                stats = reward_step(
                    rm, model, optimizer, next(batches).to(run.device), None, run.config.max_grad_norm, "online/rm_loss"
                )
            model.requires_grad_(False)
            losses.append(stats["loss"].item())
        return sum(losses) / len(losses)

    def notes(self) -> dict:
        """What summary.json records of the refreshes."""
        return {
            "refreshes": self.refreshes,
            "labels_online": self.online_labels,
            "labels_total": self.initial_labels + self.online_labels,
            **{k: v for k, v in vars(self.settings).items()},
        }

    def save_pairs(self) -> None:
        """The run's labelled pairs, ``online_pairs.jsonl`` in the run folder (train_reward_model.py --pairs_file
        reads them)."""
        from rlhf_practice.preferences import write_pairs

        if self.run.logger.writes and self.labelled:
            write_pairs(self.run.logger.run_dir / "online_pairs.jsonl", self.labelled)


def attach(run: TrainingRun) -> None:
    """``run.online``: the refreshes of ``--online.refresh_every`` (printed in one line), or None without it. The
    training scripts call it first thing in their run (training.py does not import this module: the pairs machinery
    imports training's types)."""
    settings = getattr(run.config, "online", None)
    if settings is None or settings.refresh_every == 0:
        return
    run.online = OnlineLabels(run, run.learned_reward)
    if run.logger.writes:
        print(describe(settings), file=sys.stderr)


def describe(settings: OnlineConfig) -> str:
    """The line for the start of a run."""
    s = settings
    most = f", at most {s.max_refreshes} times" if s.max_refreshes else ""
    picked = (
        "random pairs"
        if s.selection == "random"
        else f"{s.selection} of {s.labels_per_refresh * s.candidates_per_label}"
    )
    trained = (
        "nothing (an audit)"
        if s.rm_steps == 0
        else ("anew from the starting policy, " if s.retrain else "")
        + f"{s.rm_steps} steps on "
        + ("every pair so far" if s.replay else "the new pairs only")
    )
    return (
        f"online: every {s.refresh_every} steps{most}, the annotator's labels of {s.labels_per_refresh} pairs of the "
        f"current policy's replies ({picked}); the reward model trained {trained}"
    )
