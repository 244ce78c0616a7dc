"""One way to replace a file that another program may read at any moment: write beside, then rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(target: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write `data` to a temporary file in `target`'s folder, fsync it, and rename it over `target`.

    A reader (Prometheus reloading rules, node_exporter's textfile collector) sees the old file or
    the new one, never half of one. `mode`: mkstemp makes 0600, and the reader may be another
    user. OSError from creating the temporary file propagates; callers word it for their option.
    """
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
