"""The shipped tiny-preset assets (not graded): small, and reproducible by scripts/build_tiny_assets.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from rlhf_practice import ASSETS_DIR, PACKAGE_DIR

ROOT = PACKAGE_DIR.parent


def _build_script():
    spec = importlib.util.spec_from_file_location("build_tiny_assets", ROOT / "scripts/build_tiny_assets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shipped_corpus() -> list[dict]:
    import pyarrow.parquet as pq  # imported here, as in every test module: see tests/test_layers.py

    return pq.read_table(ASSETS_DIR / "tiny_reviews.parquet").to_pylist()


def test_assets_fit_the_size_budget() -> None:
    total = sum(p.stat().st_size for p in ASSETS_DIR.rglob("*") if p.is_file())
    assert total <= 8 * 1024 * 1024, f"assets take {total / 2**20:.1f} MiB; the budget is 8 MiB"
    config = json.loads((ASSETS_DIR / "tiny_gpt2/config.json").read_text())
    assert config["architectures"] == ["GPT2LMHeadModel"]


def test_build_script_reproduces_corpus_and_tokenizer(tmp_path: Path) -> None:
    build = _build_script()
    info = json.loads((ASSETS_DIR / "tiny_gpt2/build_info.json").read_text())
    rows = build.make_corpus(info["num_reviews"], info["seed"])
    assert rows == _shipped_corpus(), "corpus differs from the build"
    build.train_tokenizer([r["text"] for r in rows], info["vocab_size"], tmp_path)
    rebuilt = json.loads((tmp_path / "tokenizer.json").read_text())["model"]
    shipped = json.loads((ASSETS_DIR / "tiny_gpt2/tokenizer.json").read_text())["model"]
    assert rebuilt["vocab"] == shipped["vocab"] and rebuilt["merges"] == shipped["merges"]


def test_corpus_is_varied_and_balanced() -> None:
    texts = [r["text"] for r in _shipped_corpus()]
    long_texts = [t for t in texts if len(t.split()) > 20]
    assert len(set(long_texts)) > 0.99 * len(long_texts), "long reviews should rarely repeat"
    # About half are a sentence or two (a few of those repeat: "What a waste of time."), so that a
    # tiny-preset reply of 12 tokens can reach EOS and response/length varies.
    assert 0.4 < sum(len(t.split()) <= 12 for t in texts) / len(texts) < 0.6, "short reviews expected"
    assert len(set(texts)) > 0.85 * len(texts), "reviews should rarely repeat"
    vocabulary = {w.strip(".,!?;:").lower() for t in texts for w in t.split()}
    assert len(vocabulary) >= 300
    assert any(" not good" in t or " not great" in t for t in texts), "negations expected"
    lengths = sorted(len(t.split()) for t in texts)
    assert lengths[len(lengths) // 10] < lengths[9 * len(lengths) // 10], "lengths should vary"
