"""`gpuplan completion bash|zsh`: a shell completion script generated from the argument parser.

Commands, their options and the values of those options come from the parser itself, so the
script never lags the CLI; seat and host names come from the catalogue when completing, through
the hidden `gpuplan completion --names seats|hosts [--catalogue FILE]`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from placement.cli.names import KINDS
from seats.errors import BadInputError

HELP = "print a bash or zsh completion script"
DESCRIPTION = """\
Print a completion script for bash or zsh: commands, options, the choices of options such as
--solver, file names where a file is asked for, and seat and host names read from the
catalogue (--catalogue on the line being completed, else $GPUPLAN_CATALOGUE).

  bash:  echo 'source <(gpuplan completion bash)' >> ~/.bashrc
  zsh:   echo 'source <(gpuplan completion zsh)' >> ~/.zshrc   (after compinit)"""

SHELLS = ("bash", "zsh")
# Metavars of options whose value is a path: the shell completes file names for them.
FILE_METAVARS = frozenset({"FILE", "DB", "DIR", "DIR|FILE", "SNAPSHOT", "SEAT.yaml"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SHELL; hidden: --names seats|hosts and --catalogue, for the script's own calls."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("shell", nargs="?", choices=SHELLS, metavar="SHELL", help="bash or zsh")
    parser.add_argument("--names", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--catalogue", default=os.environ.get("GPUPLAN_CATALOGUE"), help=argparse.SUPPRESS
    )


def run(args: argparse.Namespace) -> int:
    """Print the script, or (--names) the catalogue's seat or host names one per line."""
    if args.names is not None:
        from placement.cli.names import names
        from placement.cli.sources import load_catalogue_argument

        print("\n".join(names(load_catalogue_argument(args), args.names)))
        return 0
    if args.shell is None:
        raise BadInputError("name a shell: gpuplan completion bash, or gpuplan completion zsh")
    print(script(args.shell, command_specs()))
    return 0


@dataclass(frozen=True)
class CommandSpec:
    """What completion needs of one command: its options and what each option's value is.

    A value is "files", "seats", "hosts", "free" (nothing to offer) or the option's choices
    joined by spaces; `positional` is "seats" when the command takes a SEAT word, or the
    choices of its positional word joined by spaces.
    """

    name: str
    options: tuple[str, ...]
    values: dict[str, str]
    positional: str | None


def _value(action: argparse.Action) -> str | None:
    """What follows the option on the line; None for a flag."""
    if action.nargs == 0:
        return None
    if action.choices is not None:
        return " ".join(str(choice) for choice in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if metavar == "SEAT":
        return "seats"
    if action.dest == "host":
        return "hosts"
    return "files" if metavar in FILE_METAVARS else "free"


def _spec(name: str, parser: argparse.ArgumentParser) -> CommandSpec:
    options: list[str] = []
    values: dict[str, str] = {}
    positional = None
    for action in parser._actions:
        if not action.option_strings:
            if action.metavar == "SEAT":
                positional = "seats"
            elif action.choices is not None:
                positional = " ".join(str(choice) for choice in action.choices)
            continue
        if action.help == argparse.SUPPRESS:
            continue
        long = [option for option in action.option_strings if option.startswith("--")]
        options.extend(long)
        value = _value(action)
        if value is not None:
            values.update(dict.fromkeys(action.option_strings, value))
    return CommandSpec(name, tuple(options), values, positional)


def command_specs() -> tuple[tuple[str, ...], list[CommandSpec]]:
    """The top-level options and one spec per command, read from `gpuplan`'s parser."""
    from placement.cli.main import build_parser

    parser = build_parser()
    top: list[str] = []
    specs: list[CommandSpec] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            specs.extend(_spec(name, sub) for name, sub in action.choices.items())
        else:
            top.extend(option for option in action.option_strings if option.startswith("--"))
    return tuple(top), specs


_NAMES = r"""_gpuplan_names() {
    # Seat or host names: the catalogue is --catalogue on the line, else $GPUPLAN_CATALOGUE.
    local prog="" catalogue="" previous="" word
    local -a extra
    for word in "${COMP_WORDS[@]}"; do
        [[ -z $prog ]] && prog=${word/#\~/$HOME}
        [[ $previous == --catalogue ]] && catalogue=$word
        [[ $word == --catalogue=* ]] && catalogue=${word#--catalogue=}
        previous=$word
    done
    extra=()
    [[ -n $catalogue ]] && extra=(--catalogue "${catalogue/#\~/$HOME}")
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$("$prog" completion --names "$1" "${extra[@]}" 2>/dev/null)" -- "$cur"))
}

_gpuplan_files() {
    compopt -o filenames 2>/dev/null
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$cur"))
}
"""

_HEAD = r"""_gpuplan() {
    local cur=$2 prev=$3 command="" word i=0 options="" positional=""
    COMPREPLY=()
    # The command is the first word after `gpuplan` that is not an option.
    for word in "${COMP_WORDS[@]}"; do
        if (( i > 0 && i < COMP_CWORD )) && [[ -z $command && $word != -* ]]; then
            command=$word
        fi
        i=$((i + 1))
    done
    if [[ -z $command ]]; then
        COMPREPLY=($(compgen -W "%(words)s" -- "$cur"))
        return 0
    fi
    case $command in
"""

_TAIL = r"""        *) return 0 ;;
    esac
    if [[ -n $positional && $cur != -* ]]; then
        case $positional in
            seats) _gpuplan_names seats ;;
            *) COMPREPLY=($(compgen -W "$positional" -- "$cur")) ;;
        esac
    else
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
    fi
    return 0
}
"""


def _action(value: str) -> str:
    if value in ("seats", "hosts"):
        return f"_gpuplan_names {value}"
    if value == "files":
        return "_gpuplan_files"
    if value == "free":
        return ":"
    return f'COMPREPLY=($(compgen -W "{value}" -- "$cur"))'


def _case(spec: CommandSpec) -> list[str]:
    """One `name)` branch: the value of the option just typed, else the options or SEAT."""
    lines = [f"        {spec.name})", f'            options="{" ".join(spec.options)}"']
    if spec.positional:
        lines.append(f'            positional="{spec.positional}"')
    by_value: dict[str, list[str]] = {}
    for option, value in spec.values.items():
        by_value.setdefault(value, []).append(option)
    if by_value:
        lines.append("            case $prev in")
        for value, options in by_value.items():
            lines.append(f"                {'|'.join(options)}) {_action(value)}; return 0 ;;")
        lines.append("            esac")
    lines.append("            ;;")
    return lines


def bash_function(top: tuple[str, ...], specs: list[CommandSpec]) -> str:
    """`_gpuplan`, the completion function bash calls (zsh too, through bashcompinit)."""
    words = " ".join([*(spec.name for spec in specs), *top])
    body = [line for spec in specs for line in _case(spec)]
    return _NAMES + "\n" + _HEAD % {"words": words} + "\n".join(body) + "\n" + _TAIL


def script(shell: str, parsed: tuple[tuple[str, ...], list[CommandSpec]]) -> str:
    """The whole script for `shell`: bash's `complete -F`, or zsh's bashcompinit around it."""
    function = bash_function(*parsed)
    source = f"source <(gpuplan completion {shell})"
    head = f"# {shell} completion for gpuplan, generated by `gpuplan completion {shell}`.\n"
    if shell == "bash":
        return f"{head}# Load it with: {source}\n\n{function}\ncomplete -F _gpuplan gpuplan"
    return (
        f"{head}# Load it after compinit with: {source}\n\n"
        "autoload -U +X bashcompinit && bashcompinit\n\n"
        f"{function}\ncomplete -F _gpuplan gpuplan"
    )
