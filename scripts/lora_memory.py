"""LoRA against full fine-tuning on a GPT-2-124M-shaped model: peak memory of one training step.

    python scripts/lora_memory.py                       # train_grpo.py, --lora_r 8 on c_attn vs full fine-tuning
    python scripts/lora_memory.py --extra --lora_target_modules c_attn c_proj c_fc

The model has GPT-2-124M's shape (12 layers, 768 wide, 50257-token embedding) with random weights, built
locally (scripts/benchmark.py's build_gpt2_shape: no hub). Each setting runs ``train_grpo.py`` for
--num_steps steps in its own fresh process (so that one run's memory never counts in the other's), with
the tiny preset's prompts and --train_batch_size x --grpo_group_size replies. Per setting it prints, from
the run's summary.json: the trainable parameters (and their share), the resident memory before the first
step, the peak (peak_memory_mb: resident memory on a CPU, torch's allocated memory on a CUDA device),
the mean step time, and the size of what the run saved as its policy (the adapter file with LoRA, the
full model without). Nothing here is a test: it prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmark import build_gpt2_shape  # noqa: E402

from rlhf_practice.tracking import load_run  # noqa: E402

SETTINGS = {"full fine-tuning": [], "LoRA r=8": ["--lora_r", "8"]}


def one_run(model_dir: Path, flags: list[str], args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "train_grpo.py", "--preset", "tiny", "--impl", args.impl, "--device", "cpu"]
        command += ["--model.model_name", str(model_dir), "--num_steps", str(args.num_steps), "--seed", "0"]
        command += ["--train_batch_size", str(args.train_batch_size), "--grpo_group_size", str(args.grpo_group_size)]
        command += ["--run_dir", tmp, "--run_name", "run", *flags, *args.extra]
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
        run = load_run(Path(tmp) / "run")
        policy = Path(tmp) / "run" / "policy"
        weights = policy / (
            "adapter_model.safetensors" if (policy / "adapter_config.json").is_file() else "model.safetensors"
        )
        steps = run.metrics["time/step_s"]
        return {
            "trainable_parameters": run.summary["trainable_parameters"],
            "all_parameters": run.summary["all_parameters"],
            "trainable_percent": run.summary["trainable_percent"],
            "memory_at_start_mb": run.summary["memory_at_start_mb"],
            "peak_memory_mb": run.summary["peak_memory_mb"],
            "step_s": round(sum(steps) / len(steps), 2),
            "saved_file": weights.name,
            "saved_mb": round(weights.stat().st_size / 2**20, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='whose rl/ functions train_grpo.py runs, as its --impl: "student" (the default, as the script) or a folder',
    )
    parser.add_argument("--num_steps", type=int, default=1)
    parser.add_argument("--train_batch_size", type=int, default=8)
    parser.add_argument("--grpo_group_size", type=int, default=4)
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to every run")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpt2-shape-") as model_dir:
        build_gpt2_shape(Path(model_dir))
        for name, flags in SETTINGS.items():
            print(f"running {name} ...", file=sys.stderr, flush=True)
            results[name] = one_run(Path(model_dir), flags, args)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
