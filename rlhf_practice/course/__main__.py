"""Instructor commands for the course.

python -m rlhf_practice.course fixtures        # record the graded cases from the answer key
python -m rlhf_practice.course release OUT     # write the student release (no key) to OUT
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rlhf_practice.checks import CASES_FILE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rlhf_practice.course", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fixtures", help=f"rewrite {CASES_FILE.relative_to(CASES_FILE.parents[2])} from the answer key")
    release = commands.add_parser("release", help="write the student release to OUT")
    release.add_argument("out", type=Path, help="a new (or empty) folder")
    args = parser.parse_args(argv)

    if args.command == "fixtures":
        from rlhf_practice.course.cases import build_cases

        cases = build_cases()
        CASES_FILE.parent.mkdir(parents=True, exist_ok=True)
        torch.save(cases, CASES_FILE)
        print(f"wrote {len(cases)} cases to {CASES_FILE} ({CASES_FILE.stat().st_size / 1024:.0f} KiB)")
    else:
        from rlhf_practice.course.release import build_release

        files = build_release(args.out)
        size = sum((args.out / f).stat().st_size for f in files)
        print(f"wrote the student release to {args.out}: {len(files)} files, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
