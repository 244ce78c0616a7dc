"""A process's command line from this machine's /proc, as the poller and a replay's fallback read it.

Its own module so `poller` and `fake` both import it and neither imports the other back.
"""

from __future__ import annotations

CMDLINE_LIMIT = 64 * 1024


def read_proc_cmdline(pid: int) -> str | None:
    """`/proc/PID/cmdline` with NULs as spaces; None when the PID has vanished or is unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(CMDLINE_LIMIT)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None  # ESRCH and friends: the process went away while we read
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", errors="replace")
