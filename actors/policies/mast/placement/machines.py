"""A cluster's machine states as an immutable sequence that shares what a change keeps.

A snapshot of a cluster lists thousands of machines and the next snapshot
changes a few of them (a plan, a hold, a release). As a tuple, each new
snapshot copied every reference; `MachineRow` keeps its states in chunks of
`CHUNK`, and `patched` copies only the chunks it changes and the list of
chunks. It is a `Sequence` equal to the tuple of its states (and hashes as
it), so whoever reads a snapshot's machines iterates, indexes and compares
them as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, overload

from actors.policies.mast.placement.snapshot import MachineState

CHUNK = 64


class MachineRow(Sequence[MachineState]):
    __slots__ = ("_chunks", "_len")

    def __init__(self, chunks: tuple[tuple[MachineState, ...], ...], length: int) -> None:
        self._chunks = chunks
        self._len = length

    @classmethod
    def of(cls, states: Iterable[MachineState]) -> MachineRow:
        flat = tuple(states)
        chunks = tuple(flat[i : i + CHUNK] for i in range(0, len(flat), CHUNK))
        return cls(chunks, len(flat))

    def patched(self, at: Sequence[int], states: Sequence[MachineState]) -> MachineRow:
        """This row with `states[i]` at position `at[i]`."""
        if len(at) != len(states):
            raise ValueError(f"patched: {len(at)} positions for {len(states)} states")
        chunks = list(self._chunks)
        opened: dict[int, list[MachineState]] = {}
        for i, state in zip(at, states, strict=True):
            if not 0 <= i < self._len:
                raise IndexError(f"patched: position {i} outside 0..{self._len - 1}")
            k = i // CHUNK
            chunk = opened.get(k)
            if chunk is None:
                chunk = opened[k] = list(chunks[k])
            chunk[i % CHUNK] = state
        for k, chunk in opened.items():
            chunks[k] = tuple(chunk)
        return MachineRow(tuple(chunks), self._len)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[MachineState]:
        return chain.from_iterable(self._chunks)

    @overload
    def __getitem__(self, index: int) -> MachineState: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[MachineState, ...]: ...
    def __getitem__(self, index: int | slice) -> MachineState | tuple[MachineState, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("MachineRow index out of range")
        return self._chunks[index // CHUNK][index % CHUNK]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MachineRow):
            return self._len == other._len and (
                self._chunks is other._chunks or tuple(self) == tuple(other)
            )
        if isinstance(other, tuple):
            return self._len == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MachineRow({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (MachineRow.of, (tuple(self),))
