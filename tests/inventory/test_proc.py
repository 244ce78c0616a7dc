"""Reading a process's command line from /proc: NULs become spaces, a vanished PID reads as None."""

from __future__ import annotations

import subprocess
import sys

from inventory.proc import read_proc_cmdline


def test_read_proc_cmdline_turns_nuls_into_spaces_and_vanished_into_none() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "print('up', flush=True); input()", "--port", "8027"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdout.readline()  # the child has exec'd: its own cmdline is in /proc
        text = read_proc_cmdline(child.pid)
        assert text is not None
        assert text.endswith("print('up', flush=True); input() --port 8027")
        assert "\0" not in text
    finally:
        child.stdin.write(b"\n")
        child.stdin.close()
        child.wait()
    assert read_proc_cmdline(child.pid) is None
