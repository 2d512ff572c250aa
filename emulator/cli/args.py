"""Argument types of the `mastemu` command line: each turns text into a value or says why not."""

from __future__ import annotations

import argparse

from emulator.errors import InputError
from emulator.run import sweep
from emulator.units import parse_duration_us


def duration(text: str) -> int:
    try:
        value = parse_duration_us(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except OverflowError:  # '999…9h' overflows float → int
        raise argparse.ArgumentTypeError(f"too large: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError("must be between 0 and 2**63-1")
    return value


def seed_range(text: str) -> range:
    try:
        return sweep.seed_range(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def job_count(text: str) -> int:
    try:
        return sweep.job_count(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None
