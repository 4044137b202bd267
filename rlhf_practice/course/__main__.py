"""Instructor commands for the course.

python -m rlhf_practice.course fixtures        # record the graded cases from the answer key (kept if they agree)
python -m rlhf_practice.course release OUT     # write the student release (no key) to OUT
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlhf_practice.checks import CASES_FILE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rlhf_practice.course", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "fixtures",
        help=f"record {CASES_FILE.relative_to(CASES_FILE.parents[2])} from the answer key (kept if it already agrees)",
    )
    release = commands.add_parser("release", help="write the student release to OUT")
    release.add_argument("out", type=Path, help="a new (or empty) folder")
    args = parser.parse_args(argv)

    if args.command == "fixtures":
        from rlhf_practice.course.fixtures import record

        count, written = record(CASES_FILE)
        if written:
            print(f"wrote {count} cases to {CASES_FILE} ({CASES_FILE.stat().st_size / 1024:.0f} KiB)")
        else:
            print(
                f"{CASES_FILE} already agrees with the answer key ({count} cases, within the fixture tolerance): kept"
            )
    else:
        from rlhf_practice.course.release import build_release

        files = build_release(args.out)
        size = sum((args.out / f).stat().st_size for f in files)
        print(f"wrote the student release to {args.out}: {len(files)} files, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
