"""The policy: a causal language model (GPT-2) plus a scalar value head.

Shapes used below: B = sequences in the batch, P = prompt length (left-padded), T = response
length, L = P + T, V = vocabulary size, H = hidden size.

One PPO/GRPO step uses the model twice:

1. :meth:`rlhf_practice.sampling.Sampler.sample` samples replies (no gradient) and returns them as a
   :class:`Generation`: the ids of prompt + reply and a ``response_mask`` that covers each reply up
   to and including its first EOS;
2. :meth:`PolicyValueModel.evaluate_sequences` evaluates those sequences (with gradient when needed):
   the summed log-probability of each reply, the value V(s) of each prompt, and the entropy.
   :meth:`PolicyValueModel.evaluate_tokens` gives the same per reply token (the token-level track).
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from rlhf_practice import ASSETS_DIR
from rlhf_practice.errors import ModelLoadError

TINY_MODEL_DIR = ASSETS_DIR / "tiny_gpt2"
VALUE_HEAD_FILE = "value_head.pt"
ADAPTER_CONFIG_FILE = "adapter_config.json"  # what peft's save_pretrained writes beside adapter_model.safetensors
ADAPTER_BASE_DIR = "base"  # a LoRA policy folder's own copy of its base model, when the base is on no disk

if TYPE_CHECKING:  # transformers and peft are imported where they are used: importing them takes seconds
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def resolve_model_name(model_name: str) -> str:
    """ "tiny" -> the shipped model folder; anything else (hub name or folder) unchanged."""
    return str(TINY_MODEL_DIR) if model_name == "tiny" else model_name


def _load_error(what: str, name: str, err: Exception) -> ModelLoadError:
    folder = Path(name).expanduser()
    if name.startswith(("/", "./", "../", "~")) and not folder.exists():
        return ModelLoadError(f"model.model_name={name!r}: no such folder. Check the path, or use --preset tiny.")
    if folder.is_dir() and not (folder / "config.json").is_file() and not (folder / ADAPTER_CONFIG_FILE).is_file():
        return ModelLoadError(
            f"model.model_name={name!r} is a folder but not a saved model (no config.json); give a folder "
            "that save_pretrained wrote, such as runs/<run>/policy."
        )
    hint = "use --preset tiny (works offline), a local folder, or set HF_ENDPOINT to a mirror of the Hugging Face Hub."
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        hint = "HF_HUB_OFFLINE=1 is set, so only cached models load; " + hint
    first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
    return ModelLoadError(f"could not load the {what} of model.model_name={name!r} ({first_line}); {hint}")


def load_tokenizer(model_name: str) -> PreTrainedTokenizerBase:
    """The tokenizer of ``model_name``, set up for generation: left padding and a pad token."""
    from transformers import AutoTokenizer

    path = resolve_model_name(model_name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise _load_error("tokenizer", model_name, err) from err
    if tokenizer.eos_token is None:
        raise ModelLoadError(f"the tokenizer of model.model_name={model_name!r} has no EOS token; pick a causal LM.")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token  # GPT-2 has no pad token; padding is masked out anyway
    tokenizer.padding_side = "left"
    return tokenizer


@dataclass
class Generation:
    """Sampled replies, what :meth:`rlhf_practice.sampling.Sampler.sample` returns.

    sequences:      LongTensor (B, L)  prompt ids (left-padded) followed by the reply ids
    attention_mask: LongTensor (B, L)  1 for real prompt tokens and for reply tokens in response_mask
    response_mask:  FloatTensor (B, T) 1 for reply tokens up to and including the first EOS, else 0
    prompt_length:  int                P; the reply of row b is sequences[b, P:]
    temperature:    float              the sampling temperature: scoring divides the logits by it too,
                                       so that log-probs are those of the distribution sampled

    ``generation[idx]`` selects rows (a minibatch); ``generation.decode(tokenizer)`` gives the replies.
    """

    sequences: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    prompt_length: int
    temperature: float = 1.0

    @property
    def response_ids(self) -> torch.Tensor:
        """LongTensor (B, T): the reply part of ``sequences``."""
        return self.sequences[:, self.prompt_length :]

    def __getitem__(self, idx: torch.Tensor | slice) -> Generation:
        """The rows ``idx`` (an index tensor or a slice) of every field."""
        return Generation(
            self.sequences[idx], self.attention_mask[idx], self.response_mask[idx], self.prompt_length, self.temperature
        )

    def __len__(self) -> int:
        return self.sequences.shape[0]

    def decode(self, tokenizer: PreTrainedTokenizerBase) -> list[str]:
        """The text of each reply up to its first EOS (the tokens the reward and the loss see)."""
        ids = self.response_ids.masked_fill(self.response_mask == 0, tokenizer.pad_token_id)
        return tokenizer.batch_decode(ids, skip_special_tokens=True)

    @staticmethod
    def cat(generations: Sequence[Generation], pad_token_id: int) -> Generation:
        """The rows of ``generations`` in order, as one: prompts left-padded and replies right-padded
        with ``pad_token_id`` to the widest of each (attention and response mask 0 there), so each row's
        real tokens, their positions and so their log-probs are those of its own generation."""
        if len({g.temperature for g in generations}) > 1:
            raise ValueError("Generation.cat: the generations were sampled at different temperatures.")
        prompt_length = max(g.prompt_length for g in generations)
        width = max(g.response_mask.shape[1] for g in generations)  # T
        sequences, attention, response = [], [], []
        for g in generations:
            left, right = prompt_length - g.prompt_length, width - g.response_mask.shape[1]
            sequences.append(F.pad(g.sequences, (left, right), value=pad_token_id))
            attention.append(F.pad(g.attention_mask, (left, right), value=0))
            response.append(F.pad(g.response_mask, (0, right), value=0))
        return Generation(
            torch.cat(sequences), torch.cat(attention), torch.cat(response), prompt_length, generations[0].temperature
        )


@dataclass
class SequenceOutputs:
    """What :meth:`PolicyValueModel.evaluate_sequences` returns.

    logprobs: (B,) sum over reply tokens of log pi(token | prefix); prompt and padding excluded
    values:   (B,) value head read at the last prompt token, V(s) of the prompt
    entropy:  ()   mean per-token entropy of the policy over reply tokens
    """

    logprobs: torch.Tensor
    values: torch.Tensor
    entropy: torch.Tensor


@dataclass
class TokenOutputs:
    """What :meth:`PolicyValueModel.evaluate_tokens` returns: one column per reply token (B, T).

    logprobs: (B, T) log pi(token_t | prompt, tokens before t)
    values:   (B, T) value head read at the state before token t, V(s_t)
    entropy:  (B, T) entropy of the policy's next-token distribution at that state
    """

    logprobs: torch.Tensor
    values: torch.Tensor
    entropy: torch.Tensor


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """LongTensor (B, L): positions that start at 0 on the first real token, as generate() uses them."""
    return (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)


def response_mask_from_ids(response_ids: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """FloatTensor (B, T): 1 up to and including the first ``eos_token_id`` of each row, 0 after it."""
    is_eos = (response_ids == eos_token_id).long()
    eos_before = torch.cumsum(is_eos, dim=1) - is_eos  # EOS tokens strictly before each position
    return (eos_before == 0).float()


class PolicyValueModel(nn.Module):
    """A causal LM (``self.lm``) plus ``self.value_head``: Linear(H, 1) on the last hidden states.

    The model stays in eval mode (no dropout) so that log-probs of the same sequence agree between
    sampling and updating; gradients still flow when they are enabled.

    Precision is decided once, by :meth:`from_pretrained`, and held in ``bf16``: True (mixed
    precision asked for, on a CUDA device) runs the transformer under bfloat16 autocast; the LM head
    and the value head run in float32 either way. False (always on a CPU): everything in float32.

    LoRA (:meth:`add_lora`, ``--lora_r``): peft injects its layers into ``self.lm`` in place, so
    ``self.lm`` stays the causal LM every caller uses, now with the adapter active; the PeftModel
    around it (:attr:`peft_model`, not a submodule: no parameter is counted twice) saves the adapter
    and switches it off. The value head stays outside the adapter and trains fully.
    """

    def __init__(self, lm: PreTrainedModel, value_head: nn.Linear | None = None, value_head_init: str = "zero"):
        super().__init__()
        self.lm = lm
        hidden = lm.config.hidden_size
        if value_head is None:
            # "zero": V(s) = 0 at the start, so A = R - V begins as the plain (normalized) reward
            # instead of reward minus random noise (TASKS.md §4.1 measures the difference).
            value_head = nn.Linear(hidden, 1)
            if value_head_init == "random":
                nn.init.normal_(value_head.weight, std=1.0 / (hidden + 1) ** 0.5)
            else:
                nn.init.zeros_(value_head.weight)
            nn.init.zeros_(value_head.bias)
        self.value_head = value_head.to(device=lm.device, dtype=lm.dtype)
        self.bf16 = False
        # Where the LM's weights can be loaded from (a hub name or a folder); None when they exist only
        # in this process (built here, or changed by a warm-up): a saved adapter then takes its base along.
        self.base_source: str | None = None
        self.adapter_is_new = False  # True for an adapter added here: lora_B = 0, so base = starting policy
        self.__dict__["_peft_model"] = None  # in __dict__, not a submodule: its parameters are self.lm's
        self.eval()

    def train(self, mode: bool = True) -> PolicyValueModel:
        """Always eval mode: RL here must not use dropout (see the class docstring)."""
        return super().train(False)

    @classmethod
    def from_pretrained(
        cls,
        model_name: str,
        device: str | torch.device = "cpu",
        value_head_init: str = "zero",
        mixed_precision: bool = True,
    ) -> PolicyValueModel:
        """Load ``model_name`` ("tiny", a hub name or a local folder), plus its value head if one was
        saved; otherwise start a new head as ``value_head_init`` says ("zero" or "random").
        ``mixed_precision`` sets ``bf16`` on a CUDA device and is ignored on a CPU."""
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # per-shard loading bars would bury the training progress bar
        path = resolve_model_name(model_name)
        adapter = (Path(path) / ADAPTER_CONFIG_FILE).is_file()
        base_path = _adapter_base(path) if adapter else path
        try:
            lm = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
        except (OSError, ValueError) as err:
            if adapter:
                first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise ModelLoadError(
                    f"model.model_name={model_name!r} holds a LoRA adapter whose base model {base_path!r} could not "
                    f"be loaded ({first_line}); put the base model there, or train with --lora_merge to save a full model."
                ) from err
            raise _load_error("weights", model_name, err) from err
        value_head = None
        head_file = Path(path) / VALUE_HEAD_FILE
        if head_file.is_file():
            value_head = nn.Linear(lm.config.hidden_size, 1)
            value_head.load_state_dict(torch.load(head_file, map_location="cpu", weights_only=True))
        policy = cls(lm, value_head, value_head_init)
        # A base saved inside an adapter folder is saved again with the next adapter (that folder may go).
        policy.base_source = None if adapter and Path(base_path).parent == Path(path) else base_path
        if adapter:  # trainable again, as it was saved
            from peft import PeftModel

            policy._set_peft_model(PeftModel.from_pretrained(lm, path, is_trainable=True), new=False)
        policy = policy.to(device)
        policy.bf16 = mixed_precision and policy.device.type == "cuda"
        return policy

    @property
    def peft_model(self) -> PeftModel | None:
        """The PeftModel around ``self.lm`` when a LoRA adapter is attached, else None."""
        return self.__dict__["_peft_model"]

    def _set_peft_model(self, peft_model: PeftModel, new: bool) -> None:
        assert peft_model.get_base_model() is self.lm, "peft injects in place: its base model is self.lm"
        self.__dict__["_peft_model"] = peft_model
        self.adapter_is_new = new
        self.eval()  # no dropout, in the adapter too

    def add_lora(self, r: int, alpha: float, dropout: float, target_modules: Sequence[str]) -> None:
        """Attach a new LoRA adapter to ``self.lm`` with peft, the way peft users do: lora_A random,
        lora_B zero (so the policy starts exactly as the base), every base weight frozen.
        GPT-2's projections are Conv1D layers (weight stored as fan_in x fan_out), hence
        ``fan_in_fan_out=True``; peft turns it off by itself for nn.Linear layers of other models."""
        from peft import LoraConfig, get_peft_model

        if self.peft_model is not None:
            raise ModelLoadError("the policy already has a LoRA adapter; start from its base model to add a new one.")
        config = LoraConfig(
            r=r,
            lora_alpha=alpha,
            lora_dropout=dropout,
            target_modules=list(target_modules),
            fan_in_fan_out=True,
            bias="none",
            task_type="CAUSAL_LM",
        )
        # fork_rng: lora_A's random start draws from the seed's stream without advancing it, so a run with
        # LoRA samples its first step exactly as the same run without (the policy is the same until then).
        with (
            warnings.catch_warnings(),
            torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []),
        ):
            # peft calls a transformers method that transformers marks deprecated
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
            peft_model = get_peft_model(self.lm, config)
        self._set_peft_model(peft_model, new=True)

    @contextmanager
    def adapter_disabled(self) -> Iterator[None]:
        """Inside: the base model (LoRA layers return their base layer's output exactly). No-op without LoRA."""
        if self.peft_model is None:
            yield
            return
        with self.peft_model.disable_adapter():
            yield

    def save_pretrained(self, folder: str | Path, merge: bool = False) -> None:
        """Write the LM with ``save_pretrained`` and the value head beside it; reload with from_pretrained.

        With a LoRA adapter: the adapter as peft saves it (adapter_config.json, adapter_model.safetensors),
        whose base_model_name_or_path names the base; a base that is on no disk (built in this process,
        or changed by a warm-up) is saved in ``folder``/base and named "base". ``merge``: the adapter
        merged into the base weights instead, a full model like any other (the policy itself is unchanged).
        """
        folder = Path(folder)
        peft_model = self.peft_model
        if peft_model is None:
            self.lm.save_pretrained(folder)
        elif merge:
            copy.deepcopy(peft_model).merge_and_unload().save_pretrained(folder)
        else:
            base = self.base_source
            if base is None:
                copy.deepcopy(peft_model).unload().save_pretrained(folder / ADAPTER_BASE_DIR)
                base = ADAPTER_BASE_DIR
            peft_model.peft_config[peft_model.active_adapter].base_model_name_or_path = base
            peft_model.save_pretrained(folder, save_embedding_layers=False)  # the vocabulary is never resized here
        torch.save(self.value_head.state_dict(), folder / VALUE_HEAD_FILE)

    def frozen_copy(self) -> PolicyValueModel:
        """A reference copy: same weights and precision, no gradients (e.g. for a KL penalty to the start policy)."""
        ref = copy.deepcopy(self)
        ref.requires_grad_(False)
        return ref

    def reference_model(self) -> PolicyValueModel | AdapterOff:
        """pi_ref, the policy as it is now, never updated: what the KL penalty of the token-level scripts
        and DPO's loss compare with. Call it before training. Without LoRA: a frozen copy of the weights.
        With a new LoRA adapter (lora_B = 0, so the policy is still its base): this same model with the
        adapter switched off (:class:`AdapterOff`), no second copy of the weights. With an adapter
        loaded from a folder (the policy is base + adapter): a frozen copy, as without LoRA."""
        if self.peft_model is not None and self.adapter_is_new:
            return AdapterOff(self)
        return self.frozen_copy()

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters that train (requires_grad): what the optimizer gets."""
        return [p for p in self.parameters() if p.requires_grad]

    def forward(self, generation: Generation, per_token: bool = False) -> SequenceOutputs | TokenOutputs:
        """``evaluate_tokens(generation)`` if ``per_token`` else ``evaluate_sequences(generation)``.

        The update steps call the model this way (``model(generation)``), because under a launcher
        ``model`` is this module wrapped in DistributedDataParallel, which averages the gradients of
        the processes only for what runs through ``forward``."""
        return self.evaluate_tokens(generation) if per_token else self.evaluate_sequences(generation)

    @property
    def device(self) -> torch.device:
        return self.lm.device

    @property
    def max_length(self) -> int:
        """Longest sequence (prompt + reply) the LM's position embeddings allow."""
        return int(getattr(self.lm.config, "n_positions", None) or self.lm.config.max_position_embeddings)

    def autocast(self) -> AbstractContextManager:
        """bfloat16 autocast if ``bf16`` (CUDA only), else a no-op."""
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.bf16 else nullcontext()

    def evaluate_sequences(self, generation: Generation) -> SequenceOutputs:
        """Evaluate the prompt + reply sequences (B, L) of ``generation``; see :class:`SequenceOutputs`.

        The reply token at position t (t >= P) is predicted by the logits at position t - 1, so the
        log-probs of the reply come from logits[:, P-1 : L-1] / temperature: the distribution the
        replies were sampled from (top_k / top_p truncation is not applied here; see the config).
        With ``bf16`` the transformer runs in bfloat16 but the LM head runs in float32, so that the
        ratios of PPO are not swamped by rounding. Gradients flow unless the caller runs
        this under ``torch.no_grad()``.
        """
        states = self._reply_states(generation)  # (B, T, H)
        token_logprobs, token_entropy = self._token_logprobs_and_entropy(states, generation)  # (B, T) each
        mask = generation.response_mask.to(token_logprobs.dtype)
        return SequenceOutputs(
            logprobs=(token_logprobs * mask).sum(dim=1),  # (B,)
            values=self._values(states[:, 0]),  # (B,): V read at the last prompt token
            entropy=(token_entropy * mask).sum() / mask.sum().clamp(min=1),
        )

    def evaluate_tokens(self, generation: Generation) -> TokenOutputs:
        """Per-token log-probs, values and entropies of the replies of ``generation``; see :class:`TokenOutputs`.

        Column t of each (B, T) result belongs to reply token t: its log-prob under the policy, the
        value V(s_t) of the state before it (prompt + reply tokens 0..t-1), and the policy's entropy
        there. Padding columns (response_mask 0) hold numbers too; mask them. Same precision and
        temperature rules as :meth:`evaluate_sequences`, which sums these.
        """
        states = self._reply_states(generation)  # (B, T, H)
        token_logprobs, token_entropy = self._token_logprobs_and_entropy(states, generation)
        return TokenOutputs(logprobs=token_logprobs, values=self._values(states), entropy=token_entropy)

    def _reply_states(self, generation: Generation) -> torch.Tensor:
        """(B, T, H) float32: the last hidden state before each reply token (positions P-1 .. L-2)."""
        with self.autocast():
            hidden = self.lm.base_model(
                input_ids=generation.sequences,
                attention_mask=generation.attention_mask,
                position_ids=position_ids_from_mask(generation.attention_mask),
                use_cache=False,
            ).last_hidden_state  # (B, L, H)
        return hidden[:, generation.prompt_length - 1 : -1].float()

    def _token_logprobs_and_entropy(
        self, states: torch.Tensor, generation: Generation
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-prob of each reply token and the entropy there, both (B, T), from float32 logits / temperature."""
        with torch.autocast(self.device.type, enabled=False):
            logits = self.lm.get_output_embeddings()(states) / generation.temperature  # (B, T, V)
        log_probs = F.log_softmax(logits, dim=-1)  # (B, T, V)
        token_logprobs = log_probs.gather(-1, generation.response_ids.unsqueeze(-1)).squeeze(-1)  # (B, T)
        return token_logprobs, -(log_probs.exp() * log_probs).sum(dim=-1)

    def _values(self, states: torch.Tensor) -> torch.Tensor:
        """The value head on states (..., H) -> (...), float32."""
        with torch.autocast(self.device.type, enabled=False):
            return self.value_head(states.to(self.value_head.weight.dtype)).squeeze(-1).float()


def _adapter_base(folder: str) -> str:
    """The base model of the LoRA adapter saved in ``folder``: its base_model_name_or_path, read
    relative to ``folder`` when the folder holds it (:data:`ADAPTER_BASE_DIR`)."""
    from peft import PeftConfig

    base = PeftConfig.from_pretrained(folder).base_model_name_or_path or ""
    beside = Path(folder) / base
    return str(beside) if base and beside.is_dir() else resolve_model_name(base)


class AdapterOffLM(nn.Module):
    """``policy.lm`` with its LoRA adapter switched off for each call: the base model's outputs.

    It holds no parameters of its own (the policy is kept outside its submodules), so what a caller
    does to it -- ``eval()``, ``requires_grad_(False)``, calls under ``torch.no_grad()`` or
    ``torch.inference_mode()`` -- cannot freeze or change the policy's adapter. Every base weight is
    frozen by peft, so its outputs carry no gradient."""

    def __init__(self, policy: PolicyValueModel):
        super().__init__()
        self.__dict__["_policy"] = policy

    def forward(self, *args: object, **kwargs: object) -> object:
        with self._policy.adapter_disabled():
            return self._policy.lm(*args, **kwargs)

    @property
    def config(self) -> object:
        return self._policy.lm.config

    @property
    def device(self) -> torch.device:
        return self._policy.device


class AdapterOff:
    """pi_ref of a policy with a new LoRA adapter: the same model with the adapter switched off, which
    gives the base model's log-probs exactly (LoRA layers then return their base layer's output) and
    stays the starting policy however the adapter trains. What the scripts use of a reference:
    :meth:`evaluate_tokens`, :meth:`evaluate_sequences` (no gradient), :meth:`autocast` and ``lm``
    (for DPO's ``reference_logps``). Its value head is the policy's; no script reads a reference's values."""

    def __init__(self, policy: PolicyValueModel):
        self.policy = policy
        self.lm = AdapterOffLM(policy)

    @property
    def device(self) -> torch.device:
        return self.policy.device

    def autocast(self) -> AbstractContextManager:
        return self.policy.autocast()

    @torch.no_grad()
    def evaluate_sequences(self, generation: Generation) -> SequenceOutputs:
        with self.policy.adapter_disabled():
            return self.policy.evaluate_sequences(generation)

    @torch.no_grad()
    def evaluate_tokens(self, generation: Generation) -> TokenOutputs:
        with self.policy.adapter_disabled():
            return self.policy.evaluate_tokens(generation)
