"""THE rule of what fits: card state, room, gate by engine and version, reserves, verdicts.

Planners and pruning may be looser than it, never stricter; every verdict shown comes from here."""
