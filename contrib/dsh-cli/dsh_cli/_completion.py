"""``dsh completion bash|zsh|fish``: a shell completion script, written from the argument parser itself.

Commands, ``sessions`` and ``config`` verbs and every option come from ``build_parser()``, so the
script never lags behind the command line; plugin commands are listed by name (not imported).
"""

from __future__ import annotations

import argparse
import shlex

__all__ = ["completion_script"]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for its sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(
        option for action in parser._actions for option in action.option_strings if option.startswith("--")
    )


def _tree(parser: argparse.ArgumentParser) -> dict[str, tuple[list[str], dict[str, list[str]]]]:
    """command -> (its options, {verb: the verb's options})."""
    from ._commands import command_entry_points

    tree = {
        name: (_options(sub), {verb: _options(p) for verb, p in _subparsers(sub).items()})
        for name, sub in _subparsers(parser).items()
    }
    for name in command_entry_points():
        tree.setdefault(name, (["--config", "--help", "--set"], {}))
    return tree


def _bash(parser: argparse.ArgumentParser) -> str:
    tree = _tree(parser)
    cases = []
    for name, (options, verbs) in sorted(tree.items()):
        if verbs:
            inner = "".join(
                f"                {shlex.quote(verb)}) words={shlex.quote(' '.join(opts))} ;;\n"
                for verb, opts in sorted(verbs.items())
            )
            cases.append(
                f"        {shlex.quote(name)})\n"
                f'            if [ "$COMP_CWORD" -eq 2 ]; then words={shlex.quote(" ".join([*sorted(verbs), *options]))}\n'
                f'            else case "${{COMP_WORDS[2]}}" in\n{inner}'
                f"                *) words={shlex.quote(' '.join(options))} ;;\n"
                "            esac; fi ;;\n"
            )
        else:
            cases.append(f"        {shlex.quote(name)}) words={shlex.quote(' '.join(options))} ;;\n")
    top = " ".join([*sorted(tree), "--help", "--version"])
    return (
        '# dsh completion for bash: eval "$(dsh completion bash)" (e.g. in ~/.bashrc)\n'
        "_dsh() {\n"
        '    local cur="${COMP_WORDS[COMP_CWORD]}" words\n'
        '    if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'        COMPREPLY=($(compgen -W {shlex.quote(top)} -- "$cur")); return\n'
        "    fi\n"
        '    case "${COMP_WORDS[1]}" in\n' + "".join(cases) + "        *) words='' ;;\n"
        "    esac\n"
        '    COMPREPLY=($(compgen -W "$words" -- "$cur"))\n'
        '    [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -f -- "$cur"))\n'
        "}\n"
        "complete -F _dsh dsh\n"
    )


def _zsh(parser: argparse.ArgumentParser) -> str:
    return (
        '# dsh completion for zsh: eval "$(dsh completion zsh)" (e.g. in ~/.zshrc)\n'
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + _bash(parser).split("\n", 1)[1]
    )


def _fish(parser: argparse.ArgumentParser) -> str:
    tree = _tree(parser)
    lines = [
        "# dsh completion for fish: dsh completion fish > ~/.config/fish/completions/dsh.fish",
        "complete -c dsh -f",
        f"complete -c dsh -n __fish_use_subcommand -a {shlex.quote(' '.join(sorted(tree)))}",
        "complete -c dsh -n __fish_use_subcommand -l version -d 'print the version and exit'",
    ]
    for name, (options, verbs) in sorted(tree.items()):
        seen = f"'__fish_seen_subcommand_from {name}'"
        if verbs:
            lines.append(f"complete -c dsh -n {seen} -a {shlex.quote(' '.join(sorted(verbs)))}")
        for option in sorted({*options, *(o for opts in verbs.values() for o in opts)}):
            lines.append(f"complete -c dsh -n {seen} -l {option.removeprefix('--')}")
    return "\n".join(lines) + "\n"


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell`` (``bash``, ``zsh`` or ``fish``)."""
    writers = {"bash": _bash, "zsh": _zsh, "fish": _fish}
    return writers[shell](parser)
