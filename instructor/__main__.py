"""Instructor commands: python -m instructor {stubs, fixtures, mutations, properties, gate-bars, release OUT,
gradescope OUT.zip};
the grader is python -m instructor.grading. See :mod:`instructor` for what each one does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlhf_practice.checks import CASES_DIR
from rlhf_practice.course import MODULES, ROOT


def main(argv: list[str] | None = None) -> None:
    import instructor

    parser = argparse.ArgumentParser(
        prog="python -m instructor",
        description=instructor.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("stubs", help="rewrite the student files in rlhf_practice/rl/ from the answer key")
    commands.add_parser(
        "fixtures",
        help=f"record {CASES_DIR.relative_to(ROOT)}/<student file>.pt from the answer key (each kept if it agrees)",
    )
    commands.add_parser("mutations", help="check that the graded cases fail every catalogued mistake")
    commands.add_parser(
        "properties", help="count the catalogued mistakes that the property tests catch; no right variant may fail"
    )
    commands.add_parser(
        "gate-bars", help="the outcome gates on the key (5 seeds), the stubs and the catalog", add_help=False
    )
    commands.add_parser(
        "gradescope", help="write a Gradescope autograder zip (python -m instructor gradescope --help)", add_help=False
    )
    release = commands.add_parser("release", help="write the student release to OUT")
    release.add_argument("out", type=Path, help="a new (or empty) folder")
    args, rest = parser.parse_known_args(argv)
    if args.command == "gate-bars":  # its own flags: python -m instructor gate-bars --help
        from instructor.gate import main as gate_bars

        return gate_bars(rest)
    if args.command == "gradescope":  # its own arguments: python -m instructor gradescope --help
        from instructor.gradescope import main as gradescope

        return gradescope(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")

    if args.command == "stubs":
        from instructor.release import student_files

        for path, source in student_files().items():
            (ROOT / path).write_text(source, encoding="utf-8")
            print(f"wrote {path} from the answer key")
    elif args.command == "fixtures":
        from instructor.fixtures import record

        count, written = record(CASES_DIR)
        for path in written:
            print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1024:.0f} KiB)")
        kept = len(MODULES) - len(written)
        if kept:
            print(
                f"{kept} of the {len(MODULES)} files of {CASES_DIR.relative_to(ROOT)} already agree with the answer key "
                f"({count} cases in all, within the fixture tolerance): kept"
            )
    elif args.command == "mutations":
        from instructor.mutations import main as mutations

        mutations()
    elif args.command == "properties":
        from instructor.properties import main as properties

        properties()
    else:
        from instructor.release import build_release

        files = build_release(args.out)
        size = sum((args.out / f).stat().st_size for f in files)
        print(f"wrote the student release to {args.out}: {len(files)} files, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
