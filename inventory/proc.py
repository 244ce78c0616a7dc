"""A process's command line, and its ancestors', from this machine's /proc, as the poller reads them.

Its own module so `poller` and `fake` both import it and neither imports the other back.
"""

from __future__ import annotations

CMDLINE_LIMIT = 64 * 1024
# Ancestors read above a GPU process: vLLM's worker (`VLLM::Worker_TP0`) sits under its engine
# core (`VLLM::EngineCore`) under the API server that carries `--port`; a shell or `uv run` may
# wrap that. Four levels reach the server in each case without wandering up a login session.
PARENT_DEPTH = 4
# Where a process tree leaves the server's own: a container's runtime shim, as the host sees it
# (`containerd-shim-runc-v2 -namespace moby -id …` is the parent of a container's first process),
# or the init a container runs first (`docker run --init`: `/sbin/docker-init -- CMD`; `tini`;
# `dumb-init`), whose line repeats whatever command it started, for any container.
SHIM_PREFIX = "containerd-shim"
RUNTIME_INITS = ("docker-init", "tini", "tini-static", "dumb-init", "conmon", "catatonit")


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


def read_proc_ppid(pid: int) -> int | None:
    """The parent PID in `/proc/PID/stat`; None when the PID has vanished or is unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read(4096)
    except OSError:
        return None
    # `PID (COMM) STATE PPID …`: COMM may hold spaces and parentheses, so split after its last `)`.
    fields = raw[raw.rfind(b")") + 1 :].split()
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1])


def read_proc_parents(pid: int, depth: int = PARENT_DEPTH) -> tuple[str, ...]:
    """The command lines of `pid`'s ancestors, nearest first, at most `depth` of them.

    Stops below PID 1 (the host's init, or a container's first process seen from inside its
    namespace), at a container runtime shim or init (left out), and at an
    ancestor that vanished or shows no command line (a kernel thread).
    """
    parents: list[str] = []
    current = pid
    while len(parents) < depth:
        parent = read_proc_ppid(current)
        if parent is None or parent <= 1:
            break
        line = read_proc_cmdline(parent)
        if not line or is_runtime_shim(line):
            break
        parents.append(line)
        current = parent
    return tuple(parents)


def is_runtime_shim(cmdline: str) -> bool:
    """True when a command line's program is a container runtime shim or a container's init."""
    program = cmdline.split(maxsplit=1)[0].rsplit("/", 1)[-1]
    return program.startswith(SHIM_PREFIX) or program in RUNTIME_INITS
