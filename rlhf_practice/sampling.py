"""Sampling replies: one :class:`Sampler` per run owns the settings, the path and its caches.

A :class:`Sampler` is built once per run from the sampling settings (``temperature``, ``top_k``,
``top_p``, ``max_new_tokens``, ``decoding``) and the policy. It resolves the path once (see
:func:`resolve_decoding`) and its :meth:`Sampler.sample` returns a :class:`~rlhf_practice.modeling.Generation`.
The two paths sample alike (temperature, then top-k, then top-p, then ``torch.multinomial``):

- "hf": Hugging Face's ``generate``. It grows its KV cache by concatenation and launches a few
  hundred small kernels per new token from Python; on a GPU the launches, not the arithmetic, set
  the pace.
- "static": :class:`StaticCacheDecoder` does the same sampling with

  - one K and one V buffer per layer, (B, heads, S, head_dim) with S = prompt width + max_new_tokens,
    allocated once per shape and written in place (``index_copy_``), so every decode step has the
    same shapes and the same tensor addresses;
  - on CUDA, that step recorded once as a CUDA graph (``torch.cuda.CUDAGraph``) and replayed for each
    new token: one launch instead of hundreds. The capture is paid once per batch shape and reported
    in :attr:`Sampler.capture_seconds`.

  - eagerly (on a CPU), each step writes its column with ``narrow().copy_()`` and attends only to the
    columns written so far, with no mask to build: per token, the forward of one token and the draw;
    the draw's noise (B x V exponentials) comes from :func:`exponential_noise`, the numbers
    ``exponential_()`` draws at a third of its cost.
  - the prompts go through the model once per distinct prompt row (a GRPO group's K rows share one),
    their keys, values and last logits copied to the rows that repeat it.

  It reuses the model's own modules (layer norms, projections, MLPs, LM head), so it follows the
  weights as training updates them in place. It stops when every row has ended, as ``generate``
  does, so under the same seed both paths draw the same random numbers: the tests compare them token
  for token on the CPU, where this path runs eagerly.

The sampler, its decoder and the decoder's CUDA graphs live here, never on the policy: a copy of the
policy (``frozen_copy``) is a plain deep copy.
"""

from __future__ import annotations

import functools
import sys
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from rlhf_practice.errors import ConfigError
from rlhf_practice.modeling import Generation, PolicyValueModel, position_ids_from_mask, response_mask_from_ids

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from rlhf_practice.config import TrainConfig

PROMPT_WIDTH_MULTIPLE = 8
"""Prompts are left-padded inside the decoder to a multiple of this, so that batches whose longest
prompt differs by a token or two share one captured graph."""


_MANTISSA = (1 << 53) - 1
"""The 53 bits of a random64() that ``exponential_`` turns into a uniform double on a CPU."""


class Sampler:
    """Samples one reply per prompt from ``policy`` with fixed settings, on the path ``decoding`` asks for.

    ``decoding`` "hf" uses Hugging Face ``generate``; "static" a :class:`StaticCacheDecoder` (GPT-2
    models; a CUDA graph on CUDA); "auto" static where the model allows it, else hf. After construction
    ``decoding`` is the path taken ("static" or "hf") and ``description`` says which and why (the
    start-up line of a run). Both paths run at the policy's precision (``policy.bf16``).
    """

    def __init__(
        self,
        policy: PolicyValueModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        decoding: str = "auto",
    ):
        self.policy = policy
        self.max_new_tokens, self.temperature, self.eos_token_id = max_new_tokens, temperature, tokenizer.eos_token_id
        self.settings = dict(  # what both paths take: StaticCacheDecoder.generate and transformers' GenerationConfig
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        self.decoding, self.description = resolve_decoding(decoding, policy)
        self.decoder = StaticCacheDecoder(policy.lm, policy.bf16) if self.decoding == "static" else None
        if self.decoder is None:
            from transformers import GenerationConfig

            self.generation_config = GenerationConfig(do_sample=True, min_new_tokens=0, use_cache=True, **self.settings)

    @classmethod
    def from_config(cls, policy: PolicyValueModel, tokenizer: PreTrainedTokenizerBase, config: TrainConfig) -> Sampler:
        """The sampler a run's settings describe: max_new_tokens, temperature, top_k, top_p and decoding."""
        return cls(
            policy,
            tokenizer,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_k=config.top_k,
            top_p=config.top_p,
            decoding=config.decoding,
        )

    @property
    def capture_seconds(self) -> float:
        """Seconds spent recording CUDA graphs so far (0 unless the static path runs on CUDA)."""
        return self.decoder.capture_seconds if self.decoder is not None else 0.0

    @torch.no_grad()
    def sample(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Generation:
        """Sample one reply per row of ``input_ids`` (B, P), left-padded, with the KV cache.

        Rows stop at their first EOS; the returned ``response_mask`` covers each reply up to and
        including that EOS (a reply that is EOS at once has one token in the mask).
        """
        prompt_length = input_ids.shape[1]
        if prompt_length + self.max_new_tokens > self.policy.max_length:
            raise ValueError(
                f"{self.max_new_tokens} new tokens after prompts of {prompt_length} tokens exceed the model's "
                f"{self.policy.max_length} positions."
            )
        if self.decoder is not None:
            sequences = self.decoder.generate(input_ids, attention_mask, **self.settings)
        else:
            with self.policy.autocast():
                sequences = self.policy.lm.generate(
                    input_ids=input_ids, attention_mask=attention_mask, generation_config=self.generation_config
                )
        response_mask = response_mask_from_ids(sequences[:, prompt_length:], self.eos_token_id)
        full_mask = torch.cat([attention_mask.long(), response_mask.long()], dim=1)
        return Generation(sequences, full_mask, response_mask, prompt_length, self.temperature)


def resolve_decoding(requested: str, policy: PolicyValueModel) -> tuple[str, str]:
    """``decoding`` ("auto", "static" or "hf") -> ("static" or "hf", a few words on which and why)."""
    unsupported = static_cache_support(policy.lm)
    if requested == "hf":
        return "hf", "Hugging Face generate (--decoding hf)"
    if unsupported:
        if requested == "static":
            raise ConfigError(f"decoding='static': {unsupported}; use --decoding hf (or auto).")
        return "hf", f"Hugging Face generate ({unsupported})"
    return "static", "static KV cache" + (" + CUDA graph" if policy.device.type == "cuda" else "")


def static_cache_support(lm: nn.Module) -> str | None:
    """None if ``lm`` can use :class:`StaticCacheDecoder`, else why not (one short phrase)."""
    config = getattr(lm, "config", None)
    if getattr(config, "model_type", None) != "gpt2" or not hasattr(lm, "transformer"):
        return f"the static-cache path supports GPT-2 models only, not {getattr(config, 'model_type', type(lm).__name__)!r}"
    if config.add_cross_attention or config.reorder_and_upcast_attn:
        return "the static-cache path does not support cross-attention or reorder_and_upcast_attn"
    return None


def _empty_cache(blocks: nn.ModuleList, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> list:
    """One zero buffer of ``shape`` per transformer block: the K (or V) cache of every layer."""
    return [torch.zeros(shape, dtype=dtype, device=device) for _ in blocks]


def sample_next_token(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Token ids (B,) drawn from float32 ``logits`` (B, V), processed exactly as ``generate`` does:
    divide by the temperature, keep the ``top_k`` largest (0 = all), keep the smallest set holding
    ``top_p`` of the probability (1.0 = all), then one draw per row, the very draw of
    ``torch.multinomial(probs, 1)``: it divides the probabilities by exponential noise drawn from the
    global generator for every (row, token) and takes the largest (the exponential race). Written out
    here without multinomial's checks of the input, which cost two waits per token (the decoder
    checks the prompts' logits once instead); the generator is used alike, so the tokens and what is
    drawn after them are the same bit for bit. The noise comes from :func:`exponential_noise`: the
    numbers of ``torch.empty(B, V).exponential_()``."""
    if temperature != 1.0:
        logits = logits / temperature
    if top_k:
        kth_largest = torch.topk(logits, min(top_k, logits.shape[-1]))[0][..., -1, None]
        logits = logits.masked_fill(logits < kth_largest, -float("inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=False)
        drop_sorted = sorted_logits.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        drop_sorted[..., -1:] = False  # always keep the most likely token
        logits = logits.masked_fill(drop_sorted.scatter(1, order, drop_sorted), -float("inf"))
    probs = F.softmax(logits, dim=-1)  # (B, V)
    race = exponential_noise(probs.shape, probs.device)
    return torch.div(probs, race, out=race).argmax(dim=-1)


def exponential_noise(shape: tuple[int, ...], device: torch.device | str = "cpu") -> torch.Tensor:
    """``torch.empty(shape, device=device).exponential_()``: the same float32 numbers from the same calls
    to the global generator, on a CPU at about a third of the cost (the noise of one draw of the tiny
    preset's GRPO step, 64 x 1497 numbers: about 0.6 ms instead of 1.9 ms on our 2-core machine).

    On a CPU ``exponential_`` takes, for each number in order, one random64() of the generator, keeps
    its low 53 bits as a uniform u in [0, 1) and returns -log1p(-u) computed in double, rounded to
    float32, one number at a time. ``random_()`` on an int64 tensor takes the same random64() per
    number (kept modulo 2**63, which keeps those 53 bits), and the rest runs vectorised. Where this
    torch build does not match ``exponential_`` (checked once, on a private generator), and on other
    devices, it calls ``exponential_`` itself."""
    device = torch.device(device)
    if device.type != "cpu" or not _noise_matches_exponential():
        return torch.empty(shape, device=device).exponential_()
    return _exponential_from_bits(torch.empty(shape, dtype=torch.int64).random_())


def _exponential_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """-log1p(-u) in double, rounded to float32, for u = (bits & (2**53 - 1)) / 2**53; ``bits`` is overwritten."""
    minus_u = bits.bitwise_and_(_MANTISSA).double().mul_(-(2.0**-53))  # exact: a 53-bit integer times a power of 2
    return minus_u.log1p_().neg_().float()


@functools.cache
def _noise_matches_exponential() -> bool:
    """True if :func:`_exponential_from_bits` gives ``exponential_``'s numbers in this torch build
    (2**16 numbers from two private generators with the same seed; the global one is not touched)."""
    expected = torch.empty(2**16).exponential_(generator=torch.Generator().manual_seed(1234))
    bits = torch.empty(2**16, dtype=torch.int64).random_(generator=torch.Generator().manual_seed(1234))
    return torch.equal(_exponential_from_bits(bits), expected)


class StaticCacheDecoder:
    """Samples replies from a GPT-2 ``lm`` with a static KV cache (and CUDA graphs on CUDA).

    ``bf16`` (pass the policy's: True only on CUDA) runs the model under bfloat16 autocast with a
    bfloat16 cache; otherwise everything is float32. ``use_cuda_graph`` (default: on when the model is
    on CUDA) records the decode step once per batch shape and replays it; set it False to run every
    step eagerly (what the CPU always does).
    """

    def __init__(self, lm: nn.Module, bf16: bool = False, use_cuda_graph: bool | None = None):
        reason = static_cache_support(lm)
        if reason is not None:
            raise ValueError(reason)
        self.lm = lm
        self.bf16 = bf16
        self.blocks = lm.transformer.h
        config = lm.config
        self.num_heads = config.n_head
        self.head_dim = config.n_embd // config.n_head
        self.use_cuda_graph = lm.device.type == "cuda" if use_cuda_graph is None else use_cuda_graph
        self.capture_seconds = 0.0
        self._graphs: dict[tuple, _CapturedStep] = {}

    # ------------------------------------------------------------------------- the model, one call

    def _forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        cache_index: torch.Tensor | int,
        key_mask: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
    ) -> torch.Tensor:
        """Run ``input_ids`` (B, n) at cache columns ``cache_index`` (n,); return float32 logits of
        the last position (B, V). ``key_mask`` (B, 1, n, S) says which cached keys each position sees;
        ``keys``/``values`` are the per-layer buffers (B, heads, S, head_dim), written in place.

        Eagerly ``cache_index`` may be an int c instead: the columns c .. c + n - 1, and attention then
        reads only the columns written so far, 0 .. c + n - 1 (``key_mask`` (B, 1, n, c + n)): on a CPU
        the unwritten columns would cost work every step. A CUDA graph needs the tensor form (fixed shapes)."""
        transformer = self.lm.transformer
        x = transformer.wte(input_ids) + transformer.wpe(positions)  # (B, n, H)
        batch, n = input_ids.shape
        for block, k_cache, v_cache in zip(self.blocks, keys, values):
            attn = block.attn
            q, k, v = attn.c_attn(block.ln_1(x)).split(attn.split_size, dim=2)  # (B, n, H) each
            q, k, v = (t.view(batch, n, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
            if isinstance(cache_index, int):
                k_cache.narrow(2, cache_index, n).copy_(k)
                v_cache.narrow(2, cache_index, n).copy_(v)
                k_seen, v_seen = k_cache[:, :, : cache_index + n], v_cache[:, :, : cache_index + n]
            else:
                k_cache.index_copy_(2, cache_index, k.to(k_cache.dtype))
                v_cache.index_copy_(2, cache_index, v.to(v_cache.dtype))
                k_seen, v_seen = k_cache, v_cache
            out = F.scaled_dot_product_attention(q, k_seen, v_seen, key_mask, scale=attn.scaling)  # (B, heads, n, d)
            x = x + attn.c_proj(out.transpose(1, 2).reshape(batch, n, -1))
            x = x + block.mlp(block.ln_2(x))
        return self.lm.lm_head(transformer.ln_f(x[:, -1])).float()  # (B, V)

    # ------------------------------------------------------------------------- sampling

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        max_new_tokens: int,
        eos_token_id: int,
        pad_token_id: int,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
    ) -> torch.Tensor:
        """Prompt (B, P) left-padded, plus up to ``max_new_tokens`` sampled ids: LongTensor (B, P + n).

        As ``generate``: a row that has produced EOS continues with ``pad_token_id``, and sampling
        stops when every row has ended (n <= max_new_tokens). Precision as ``bf16`` says.
        """
        batch, prompt_width = input_ids.shape
        # Left padding added inside (removed at the end) so that near widths share one CUDA graph; eagerly
        # it would only cost work.
        extra = -prompt_width % PROMPT_WIDTH_MULTIPLE if self.use_cuda_graph else 0
        ids = F.pad(input_ids, (extra, 0), value=pad_token_id)
        mask = F.pad(attention_mask.long(), (extra, 0), value=0)
        width = ids.shape[1]
        total = width + max_new_tokens  # S: cache columns
        device = ids.device
        # The autocast cache is off: cast weights made while recording would be freed after it.
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False) if self.bf16 else nullcontext()
        cache_shape = (batch, self.num_heads, total, self.head_dim)
        cache_dtype = torch.bfloat16 if self.bf16 else self.lm.transformer.wte.weight.dtype

        # Which cached key each query position may see: real earlier tokens, and itself (so that a
        # padding position has one key and its softmax stays finite; nothing real attends to it).
        key_real = torch.cat([mask.bool(), torch.ones(batch, max_new_tokens, dtype=torch.bool, device=device)], 1)
        columns = torch.arange(total, device=device)
        positions = position_ids_from_mask(mask)  # (B, P'), as the scoring pass numbers them
        next_position = positions[:, -1:] + 1  # (B, 1)

        with autocast:
            graph = self._graph_for(cache_shape, cache_dtype) if self.use_cuda_graph else None
            if graph is not None:
                keys, values = graph.keys, graph.values
            else:
                keys = _empty_cache(self.blocks, cache_shape, cache_dtype, device)
                values = _empty_cache(self.blocks, cache_shape, cache_dtype, device)
            rows = torch.arange(width, device=device)[:, None]  # (P', 1): the query positions of the prompt
            prefill_mask = (columns <= rows)[None] & key_real[:, None] | (columns == rows)[None]  # (B, P', S)
            logits = self._prefill(ids, mask, positions, prefill_mask, keys, values, eagerly=graph is None)
            if not torch.isfinite(logits).all():  # weights blown up: refuse, as torch.multinomial would
                raise RuntimeError("probability tensor contains either inf, nan or element < 0")

            unfinished = torch.ones(batch, dtype=torch.bool, device=device)
            new_tokens = torch.full((batch, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
            key_real = key_real[:, None, None]  # (B, 1, 1, S)
            for step in range(max_new_tokens):
                token = sample_next_token(logits, temperature, top_k, top_p).masked_fill_(~unfinished, pad_token_id)
                new_tokens[:, step] = token
                unfinished &= token != eos_token_id
                if step == max_new_tokens - 1 or not unfinished.any():
                    break
                column = width + step  # the cache column of this token
                if graph is not None:
                    step_mask = key_real & (columns <= column)  # (B, 1, 1, S)
                    logits = graph.run(token[:, None], next_position + step, columns[column : column + 1], step_mask)
                else:
                    step_mask = key_real[..., : column + 1]  # (B, 1, 1, column + 1): a view, the columns written
                    logits = self._forward(token[:, None], next_position + step, column, step_mask, keys, values)
        return torch.cat([input_ids, new_tokens[:, : step + 1]], dim=1)

    def _prefill(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        prefill_mask: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        eagerly: bool,
    ) -> torch.Tensor:
        """The prompts (B, P') through the model: their keys and values written to cache columns 0 .. P' - 1,
        and the logits of their last position (B, V) returned. ``prefill_mask`` (B, P', S) as in ``generate``.

        The K replies of a GRPO group share one prompt, so each distinct prompt row runs once and its keys,
        values and logits are copied to the rows that repeat it: the same numbers, row for row (nothing in
        the forward mixes rows; tests/test_sampling.py compares the tokens with ``generate``'s)."""
        width = ids.shape[1]
        distinct, inverse = torch.unique(torch.cat([ids, mask], dim=1), dim=0, return_inverse=True)
        shared = len(distinct) < len(ids)
        written_keys, written_values = keys, values  # the caches the forward writes
        if shared:  # run the first row of each distinct prompt row, into caches of those rows only
            first = torch.full((len(distinct),), len(ids), dtype=torch.long, device=ids.device)
            first.scatter_reduce_(0, inverse, torch.arange(len(ids), device=ids.device), "amin")
            ids, positions, prefill_mask = ids[first], positions[first], prefill_mask[first]
            shape = (len(distinct), *keys[0].shape[1:])
            written_keys = _empty_cache(self.blocks, shape, keys[0].dtype, ids.device)
            written_values = _empty_cache(self.blocks, shape, values[0].dtype, ids.device)
        if eagerly:
            logits = self._forward(ids, positions, 0, prefill_mask[:, None, :, :width], written_keys, written_values)
        else:
            columns = torch.arange(width, device=ids.device)
            logits = self._forward(ids, positions, columns, prefill_mask[:, None], written_keys, written_values)
        if not shared:
            return logits
        for cache, once in zip(keys + values, written_keys + written_values):
            cache[:, :, :width] = once[inverse, :, :width]
        return logits[inverse]

    def _graph_for(self, cache_shape: tuple[int, ...], cache_dtype: torch.dtype) -> _CapturedStep | None:
        """The captured step for this cache shape (recorded on first use); None if recording fails."""
        key = (cache_shape, cache_dtype)
        if key not in self._graphs:
            start = time.perf_counter()
            try:
                self._graphs[key] = _CapturedStep(self, cache_shape, cache_dtype)
            except RuntimeError as err:  # e.g. an op this torch build cannot record: decode eagerly instead
                first_line = (str(err).splitlines() or [type(err).__name__])[0]
                print(
                    f"note: recording the decode step as a CUDA graph failed ({first_line}); decoding eagerly.",
                    file=sys.stderr,
                )
                self.use_cuda_graph = False
                return None
            finally:
                self.capture_seconds += time.perf_counter() - start
        return self._graphs[key]


class _CapturedStep:
    """One decode step of a fixed batch shape, recorded as a CUDA graph over static input buffers."""

    def __init__(self, decoder: StaticCacheDecoder, cache_shape: tuple[int, ...], cache_dtype: torch.dtype):
        batch, _, total, _ = cache_shape
        device = decoder.lm.device
        self.keys = _empty_cache(decoder.blocks, cache_shape, cache_dtype, device)
        self.values = _empty_cache(decoder.blocks, cache_shape, cache_dtype, device)
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.index = torch.zeros(1, dtype=torch.long, device=device)
        self.mask = torch.zeros(batch, 1, 1, total, dtype=torch.bool, device=device)
        self.mask[..., 0] = True
        args = (self.token, self.position, self.index, self.mask, self.keys, self.values)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up runs outside the graph, as CUDA graphs require
            for _ in range(2):
                decoder._forward(*args)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = decoder._forward(*args)

    def run(self, token: torch.Tensor, position: torch.Tensor, index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token)
        self.position.copy_(position)
        self.index.copy_(index)
        self.mask.copy_(mask)
        self.graph.replay()
        return self.logits.clone()
