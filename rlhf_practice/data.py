"""Prompts for RL: the first few tokens of each review, batched with left padding.

Where the texts come from (``DataConfig.dataset_name``):

- ``"tiny"``: the built-in synthetic review corpus shipped in ``rlhf_practice/assets/``;
- a local file: ``.csv``, ``.json``, ``.jsonl`` or ``.parquet`` with a ``text`` column, or a ``.txt``
  file with one text per line;
- anything else is a Hugging Face Hub dataset name (``"imdb"``), read with ``datasets.load_dataset``.

All three go through :func:`load_texts`; local files and hub datasets through ``datasets.load_dataset``
(the shipped tiny corpus is read with pyarrow alone: importing ``datasets`` takes about a second).

One batch of :func:`build_prompt_dataloader` is a dict::

    {
        "input_ids":      LongTensor (B, P)   prompt token ids, left-padded with the pad token
        "attention_mask": LongTensor (B, P)   1 for prompt tokens, 0 for padding
        "prompt_text":    list[str] of B      the decoded prompts, for logging and for the task's reward
    }

where B = ``train_batch_size`` and P = the longest prompt of the batch (<= ``max_prompt_length``).
Left padding puts the last prompt token of every row at position P - 1, where generation starts.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import DataLoader, Dataset

from rlhf_practice import ASSETS_DIR
from rlhf_practice.config import DataConfig
from rlhf_practice.errors import DataError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

TINY_CORPUS = ASSETS_DIR / "tiny_reviews.parquet"

_LOCAL_BUILDERS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet", ".txt": "text"}
LOCAL_SUFFIXES = tuple(_LOCAL_BUILDERS)

# Prompts need only the start of a review; tokenizing this many characters is enough and fast.
_PROMPT_CHARS = 200


def load_texts(dataset_name: str, split: str = "train", text_column: str = "text", max_samples: int = 0) -> list[str]:
    """Texts of ``dataset_name`` ("tiny", a local file, or a hub dataset), cleaned of HTML line breaks."""
    if dataset_name == "tiny":  # the shipped corpus, read with pyarrow alone: importing datasets takes a second
        import pyarrow.parquet as pq

        table = pq.ParquetFile(TINY_CORPUS).read()  # read_table would import pyarrow.dataset: a quarter second
        _check_column(dataset_name, text_column, table.column_names)
        raw = table.column(text_column).to_pylist()[: max_samples or None]
    else:
        raw = _read_with_datasets(dataset_name, split, text_column, max_samples)
    texts = [t.replace("<br />", " ").strip() for t in raw if isinstance(t, str)]
    texts = [t for t in texts if t]
    if not texts:
        raise DataError(f"data.dataset_name={dataset_name!r} holds no non-empty text in column {text_column!r}.")
    return texts


def _check_column(dataset_name: str, text_column: str, column_names: list[str]) -> None:
    if text_column not in column_names:
        raise DataError(
            f"data.dataset_name={dataset_name!r} has no column {text_column!r} (columns: {', '.join(column_names)}); "
            "set --data.text_column."
        )


def _read_with_datasets(dataset_name: str, split: str, text_column: str, max_samples: int) -> list:
    """The first ``max_samples`` (0 = all) values of ``text_column`` of a local file or a hub dataset."""
    import datasets  # imported here: it is slow to import and only needed once per run

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its error logs would precede our one line

    path = Path(dataset_name).expanduser()
    if path.suffix.lower() in _LOCAL_BUILDERS or path.exists():
        ds = _load_local(datasets, path, dataset_name)
        if path.suffix.lower() == ".txt":
            text_column = "text"
    else:
        try:
            ds = datasets.load_dataset(dataset_name, split=split)
        except (ConnectionError, OSError, FileNotFoundError, ValueError) as err:
            what = f"could not load data.dataset_name={dataset_name!r} (split {split!r})"
            raise DataError(_hub_hint(what, err)) from err
    _check_column(dataset_name, text_column, ds.column_names)
    if max_samples:
        ds = ds.select(range(min(max_samples, len(ds))))
    return list(ds[text_column])


def _load_local(datasets, path: Path, name: str):
    """A local data file through ``datasets.load_dataset``, with one readable line for each way it can be wrong."""
    where = f"data.dataset_name={name!r}"
    if path.is_dir():
        raise DataError(f"{where} is a folder; give one {'/'.join(_LOCAL_BUILDERS)} file.")
    if path.suffix.lower() not in _LOCAL_BUILDERS:
        raise DataError(f"{where}: unknown file type {path.suffix!r}; use one of {', '.join(_LOCAL_BUILDERS)}.")
    if not path.is_file():
        raise DataError(f"{where}: no such file. Check the path, or use --preset tiny.")
    if path.stat().st_size == 0:
        raise DataError(f"{where}: the file is empty; it needs one text per row.")
    builder = _LOCAL_BUILDERS[path.suffix.lower()]
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as err:  # noqa: BLE001 - datasets wraps every parser error in its own types
        cause = err
        while cause.__cause__ is not None or cause.__context__ is not None:
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, UnicodeDecodeError) or "invalid utf8" in str(cause).lower():
            raise DataError(f"{where}: the file is not UTF-8 text; save it as UTF-8.") from err
        if "corresponds to no data" in str(err):
            raise DataError(f"{where}: the file holds no rows (a header alone?); it needs one text per row.") from err
        detail = str(cause).splitlines()[0] if str(cause) else ""
        raise DataError(f"{where}: could not read it as {builder} ({type(cause).__name__}: {detail}).") from err


def _hub_hint(what: str, err: Exception) -> str:
    hint = (
        "If the Hugging Face Hub is unreachable, use --preset tiny (offline), a local file, "
        "or set HF_ENDPOINT to a mirror."
    )
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        hint += " HF_HUB_OFFLINE=1 is set, so only cached data can be used."
    return f"{what}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}. {hint}"


class PromptDataset(Dataset):
    """The first N tokens of each text; N is drawn once per text from [min_len, max_len] with ``seed``."""

    def __init__(self, texts: list[str], tokenizer: PreTrainedTokenizerBase, min_len: int, max_len: int, seed: int = 0):
        rng = random.Random(seed)
        token_ids = tokenizer([t[:_PROMPT_CHARS] for t in texts], add_special_tokens=False)["input_ids"]
        long_enough = [ids for ids in token_ids if len(ids) >= min_len]
        if not long_enough:
            raise DataError(
                f"no text has data.min_prompt_length={min_len} tokens; check data.text_column and the dataset, "
                "or lower data.min_prompt_length."
            )
        if len(long_enough) < len(token_ids):
            dropped = len(token_ids) - len(long_enough)
            print(
                f"note: {dropped} of {len(token_ids)} texts are shorter than data.min_prompt_length={min_len} tokens "
                "and were left out.",
                file=sys.stderr,
            )
        self.prompts = [ids[: rng.randint(min_len, max_len)] for ids in long_enough]

    def __len__(self) -> int:
        return len(self.prompts)

    def __getitem__(self, index: int) -> list[int]:
        return self.prompts[index]


class LeftPadCollator:
    """Turns a list of token-id lists into the batch dict described in the module docstring."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self.tokenizer = tokenizer

    def __call__(self, prompts: list[list[int]]) -> dict:
        width = max(len(p) for p in prompts)
        pad_id = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], dtype=torch.long)
        attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
        prompt_text = self.tokenizer.batch_decode(prompts, skip_special_tokens=True)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "prompt_text": prompt_text}


def build_prompt_dataloader(
    config: DataConfig, tokenizer: PreTrainedTokenizerBase, batch_size: int, seed: int = 0
) -> DataLoader:
    """A shuffling DataLoader of left-padded prompt batches (see the module docstring)."""
    texts = load_texts(config.dataset_name, config.dataset_split, config.text_column, config.max_samples)
    dataset = PromptDataset(texts, tokenizer, config.min_prompt_length, config.max_prompt_length, seed)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=len(dataset) >= batch_size,
        collate_fn=LeftPadCollator(tokenizer),
        generator=generator,
    )


def infinite_batches(loader: DataLoader) -> Iterator[dict]:
    """Cycle through ``loader`` forever, reshuffling at every pass."""
    while True:
        yield from loader
