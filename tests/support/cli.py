"""Running `mastemu` in-process, as a user would from the shell."""

from __future__ import annotations

import pytest

from emulator.cli import main as cli


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `mastemu ARGV` (argparse exits count too)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err
