"""`mastemu explore`: the guided search of fault schedules (`emulator.run.explore`)."""

from __future__ import annotations

import argparse
import json
import sys

from emulator.cli.running import compare_folder
from emulator.errors import InputError
from emulator.run.explore import RunRecord, explore, summary_lines
from emulator.run.explore.grid import GridSpec
from emulator.run.scenario import resolve_scenario


def cmd_explore(args: argparse.Namespace) -> int:
    """Exit 1 if any run violated an invariant (each distinct failure written), else 0."""
    if not args.grid and (args.grid_at or args.grid_lengths):
        raise InputError("--grid-at" if args.grid_at else "--grid-lengths", "", "needs --grid")
    grid = GridSpec(args.grid_at or (), args.grid_lengths or ()) if args.grid else None
    scenario, _, _ = resolve_scenario(args.scenario)
    folder = compare_folder(args.out, scenario.name, args.seed, force=args.force, kind="explore")
    progress = sys.stderr if args.json else sys.stdout
    print(
        f"explore: {args.scenario}  seed {args.seed}  budget {args.budget.describe()}  "
        f"into {folder}",
        file=progress,
    )

    def show(record: RunRecord) -> None:
        if record.new or record.failure:
            what = f"  {record.failure}" if record.failure else ""
            print(
                f"run {record.index:>5} {record.mutation:<8} seed {record.seed:<10} "
                f"{record.faults:>3} faults  +{record.new} features{what}",
                file=progress,
            )

    result = explore(
        args.scenario,
        seed=args.seed,
        budget=args.budget,
        out_dir=folder,
        log=progress,
        stop_at_first=args.stop_at_first,
        on_run=show,
        jobs=args.jobs,
        cluster=args.cluster,
        grid=grid,
    )
    for line in summary_lines(result):
        print(line, file=progress)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True))
    return 1 if result.failures else 0
