"""Prompt data (not graded): every source goes through load_texts, the function the gpt2 preset uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlhf_practice.config import DataConfig
from rlhf_practice.data import LeftPadCollator, PromptDataset, build_prompt_dataloader, load_texts
from rlhf_practice.errors import DataError
from rlhf_practice.modeling import load_tokenizer

TEXTS = ["A great film.<br />Really.", "Terrible acting, worse plot.", "It was fine I guess."]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


def _write(folder: Path, kind: str) -> Path:
    path = folder / f"reviews.{kind}"
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)]
    if kind == "parquet":
        import pyarrow as pa  # imported here, as in every test module: see tests/test_layers.py
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    elif kind == "csv":
        path.write_text("text,label\n" + "".join(f'"{r["text"]}",{r["label"]}\n' for r in rows))
    elif kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif kind == "txt":
        path.write_text("\n".join(TEXTS) + "\n")
    return path


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl", "txt"])
def test_local_files_load_through_load_dataset(tmp_path: Path, kind: str) -> None:
    texts = load_texts(str(_write(tmp_path, kind)))
    assert texts == ["A great film. Really.", "Terrible acting, worse plot.", "It was fine I guess."]


def test_tiny_corpus_has_imdb_schema() -> None:
    import pyarrow.parquet as pq

    texts = load_texts("tiny", max_samples=50)
    assert len(texts) == 50 and all(isinstance(t, str) and t for t in texts)
    table = pq.read_table(Path(__file__).parents[1] / "rlhf_practice/assets/tiny_reviews.parquet")
    assert table.column_names == ["text", "label"]
    labels = table.column("label").to_pylist()
    assert len(labels) >= 10_000 and sum(labels) == len(labels) // 2


def test_missing_file_and_missing_column(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no such file\. Check the path, or use --preset tiny"):
        load_texts(str(tmp_path / "nope.csv"))
    with pytest.raises(DataError, match=r"has no column 'review' \(columns: text, label\); set --data.text_column"):
        load_texts(str(_write(tmp_path, "csv")), text_column="review")


def test_unreachable_hub_names_the_way_out() -> None:
    code = "from rlhf_practice.data import load_texts\nload_texts('imdb')"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "DataError" in proc.stderr
    assert "--preset tiny" in proc.stderr and "HF_ENDPOINT" in proc.stderr


def test_batches_are_left_padded(tokenizer) -> None:
    batch = LeftPadCollator(tokenizer)([[5, 6, 7], [8]])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [tokenizer.pad_token_id] * 2 + [8]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
    assert batch["input_ids"].dtype == torch.long and len(batch["prompt_text"]) == 2


def test_dataloader_prompt_lengths_and_determinism(tmp_path: Path, tokenizer) -> None:
    config = DataConfig(dataset_name="tiny", min_prompt_length=2, max_prompt_length=5, max_samples=200)
    first = next(iter(build_prompt_dataloader(config, tokenizer, batch_size=8, seed=3)))
    again = next(iter(build_prompt_dataloader(config, tokenizer, batch_size=8, seed=3)))
    assert torch.equal(first["input_ids"], again["input_ids"])
    lengths = first["attention_mask"].sum(dim=1)
    assert first["input_ids"].shape[0] == 8 and bool(((lengths >= 2) & (lengths <= 5)).all())
    assert bool((first["attention_mask"][:, -1] == 1).all()), "the last prompt token must be at position P - 1"


def test_prompts_are_review_openings(tokenizer) -> None:
    dataset = PromptDataset(["Great film, loved it."], tokenizer, min_len=3, max_len=3)
    assert "Great film, loved it.".startswith(tokenizer.decode(dataset[0]))
    assert len(dataset[0]) == 3
