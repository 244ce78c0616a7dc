"""Read a docker compose file into the services it starts, as frozen records for `check`.

Nothing in the file is run: YAML is read safely, `${VAR}` is interpolated here, and command
strings are only split (shlex), never handed to a shell or to a compose binary.
"""

from placement.check.compose.devices import resolve_cards
from placement.check.compose.dotenv import parse_env_file
from placement.check.compose.interpolation import interpolate
from placement.check.compose.load import load_compose
from placement.check.compose.model import ComposeError, ComposeFile, ComposeService

__all__ = [
    "ComposeError",
    "ComposeFile",
    "ComposeService",
    "interpolate",
    "load_compose",
    "parse_env_file",
    "resolve_cards",
]
