"""A warning or a nearest change as data: which sentence (`said`) and the numbers and names it
rests on. The words are written at the edge (placement/cli/notes_text.py), each number once.

It lives below fit, beside the engines, so that every engine module can say its notes as data too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Note:
    """One warning or nearest change: `said` names its sentence, `facts` its figures by name."""

    said: str
    facts: tuple[tuple[str, Any], ...] = ()

    def renamed(self, old: str, new: str) -> Note:
        """The same note with seat name `old` read as `new` in its names."""
        return Note(
            self.said, tuple((key, renamed_fact(value, old, new)) for key, value in self.facts)
        )

    def to_json(self) -> dict[str, Any]:
        """`{"said": said, **facts}` (tuples as lists, notes as their JSON; no `rule`, which
        only a reason has): the edge writes its words in its place (`worded_json`)."""
        return {"said": self.said, **{key: fact_json(value) for key, value in self.facts}}


def note(said: str, **named: Any) -> Note:
    """A note from keyword arguments, in the order given."""
    return Note(said, tuple(named.items()))


# Words written outside fit (check, plan) ride beside fit's notes until they are data too.
Said = Note | str


def renamed_fact(value: Any, old: str, new: str) -> Any:
    """A fact with seat name `old` read as `new` in its text, names and notes."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, tuple):
        return tuple(renamed_fact(item, old, new) for item in value)
    if isinstance(value, Note):
        return value.renamed(old, new)
    return value


def fact_json(value: Any) -> Any:
    """A fact as JSON: tuples as lists, notes as their JSON."""
    if isinstance(value, tuple):
        return [fact_json(item) for item in value]
    if isinstance(value, Note):
        return value.to_json()
    return value
