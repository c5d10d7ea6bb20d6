"""Manual pages and shell completion, generated from the same argparse parsers as ``--help``
(and ``dupfilter.toml(5)`` from config/dupfilter.toml, which documents every key).

    python3 -m mailfilter.cli.manuals            # rewrite mailfilter/data/ from the parsers

The files are committed and shipped as package data (``mailfilter/data/man``, installed
under ``share/man`` too; ``mailfilter/data/completion``); tests/test_manuals.py fails when
they differ from what this generates, so a new flag cannot miss its manual page.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from mailfilter import __version__

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]
DATE = "2026"
SEE_ALSO = ("dupfilter(1)", "dupfilter-db(1)", "dupfilter-milter(1)", "dupfilter-smtpd(1)",
            "dupfilter.toml(5)", "procmail(1)", "postconf(5)")


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser, by program name (the daemons' need pymilter/aiosmtpd)."""
    from mailfilter.cli.admin import _db_parser
    from mailfilter.cli.pipe import _filter_parser
    from mailfilter.milter.server import build_parser as milter_parser
    from mailfilter.smtpd.server import build_parser as smtpd_parser
    return {"dupfilter": _filter_parser(), "dupfilter-db": _db_parser(),
            "dupfilter-milter": milter_parser(), "dupfilter-smtpd": smtpd_parser()}


# -------------------------------------------------------------------------------- roff

def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line if line.startswith((".", "'")) else line)
                     for line in text.splitlines())


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return formatter._expand_help(action) if action.help else ""


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"\\fI{_roff(action.metavar or action.dest)}\\fR"
    metavar = ""
    if action.nargs != 0:
        metavar = action.metavar or action.dest.upper()
        if action.choices:
            metavar = "{" + ",".join(map(str, action.choices)) + "}"
        metavar = f" \\fI{_roff(str(metavar))}\\fR"
        if action.nargs == "?":
            metavar = f" [{metavar.strip()}]"
    return ", ".join(f"\\fB{_roff(flag)}\\fR" for flag in action.option_strings) + metavar


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        lines += [".TP", _flags(action), _roff(_help(parser, action) or "")]
    return lines


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().replace("usage: ", "", 1)
    return _roff(" ".join(usage.split()))


def man_page(name: str, parser: argparse.ArgumentParser) -> str:
    lines = [f'.TH "{name.upper()}" "1" "{DATE}" "dupfilter {__version__}" "dupfilter"',
             ".SH NAME", f"{_roff(name)} \\- {_roff(_summary(name))}",
             ".SH SYNOPSIS", _usage(parser),
             ".SH DESCRIPTION", _roff(parser.description or ""),
             ".SH OPTIONS", *_options(parser)]
    commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
                    None)
    if commands is not None:
        lines.append(".SH COMMANDS")
        helps = {choice.dest: choice.help for choice in commands._choices_actions}
        for command, sub in commands.choices.items():
            lines += [".SS " + _roff(command), _usage(sub), ".PP", _roff(helps.get(command) or "")]
            options = [line for line in _options(sub)]
            if options:
                lines += [".RS", *options, ".RE"]
    if parser.epilog:
        lines += [".SH NOTES", _roff(parser.epilog)]
    lines += [".SH FILES", "\\fI/etc/dupfilter/dupfilter.toml\\fR (dupfilter.toml(5)), "
              "\\fI/var/lib/dupfilter\\fR (the daemons' store), \\fI/run/dupfilter\\fR (their "
              "status: \\fBdupfilter\\-db status\\fR).",
              ".SH SEE ALSO", ", ".join(f"\\fB{_roff(page.split('(')[0])}\\fR({page[-2]})"
                                       for page in SEE_ALSO if not page.startswith(name + "("))]
    return "\n".join(lines) + "\n"


def _summary(name: str) -> str:
    return {"dupfilter": "duplicate and near-duplicate mail filter for procmail and maildrop",
            "dupfilter-db": "administer dupfilter's store; explain and compare messages",
            "dupfilter-milter": "duplicate and near-duplicate mail milter for Postfix and "
                                "Sendmail",
            "dupfilter-smtpd": "SMTP content filter for duplicate and near-duplicate mail"}[name]


def config_page(source: Path) -> str:
    """dupfilter.toml(5) from the commented example file: comments become text, each key
    a tagged paragraph with its default."""
    lines = [f'.TH "DUPFILTER.TOML" "5" "{DATE}" "dupfilter {__version__}" "dupfilter"',
             ".SH NAME", "dupfilter.toml \\- dupfilter's settings",
             ".SH DESCRIPTION"]
    comment: list[str] = []
    for raw in source.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#"):
            comment.append(line.lstrip("#").strip())
        elif line.startswith("["):
            if comment:
                lines += [".PP", _roff(" ".join(comment))]
            comment = []
            lines.append(f".SH {_roff(line)}")
        elif "=" in line:
            key, _, value = line.partition("=")
            lines += [".TP", f"\\fB{_roff(key.strip())}\\fR = {_roff(value.strip())}",
                      _roff(" ".join(comment))]
            comment = []
        elif not line and comment:
            lines += [".PP", _roff(" ".join(comment))]
            comment = []
    lines += [".SH SEE ALSO", "\\fBdupfilter\\-db\\fR(1) (config \\-\\-check, config "
              "\\-\\-show \\-\\-changed), \\fBdupfilter\\fR(1), \\fBdupfilter\\-milter\\fR(1), "
              "\\fBdupfilter\\-smtpd\\fR(1)"]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------- completion

def _option_words(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings]


def _file_options(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings
            if action.metavar and re.search(r"FILE|DIR|PATH", str(action.metavar))]


def bash_completion(parsers_by_name: dict[str, argparse.ArgumentParser]) -> str:
    out = ["# bash completion for dupfilter, dupfilter-db, dupfilter-milter, dupfilter-smtpd",
           "# (generated from their --help by mailfilter/cli/manuals.py)", ""]
    for name, parser in parsers_by_name.items():
        function = "_" + name.replace("-", "_")
        commands = next((a for a in parser._actions
                         if isinstance(a, argparse._SubParsersAction)), None)
        files = " ".join(_file_options(parser))
        out += [f"{function}() {{", "    local cur prev words cword",
                "    _init_completion || return",
                f'    case "$prev" in {files.replace(" ", "|") or "--no-file-option"}) '
                "_filedir; return ;; esac"]
        if commands is None:
            out += [f'    COMPREPLY=($(compgen -W "{" ".join(_option_words(parser))}" '
                    '-- "$cur"))']
        else:
            out += ["    local command= i", "    for ((i = 1; i < cword; i++)); do",
                    '        case "${words[i]}" in',
                    f'            {"|".join(commands.choices)}) command=${{words[i]}}; break ;;',
                    "        esac", "    done", '    case "$command" in']
            for command, sub in commands.choices.items():
                sub_files = "|".join(_file_options(sub))
                words = " ".join(_option_words(sub))
                out += [f"        {command})",
                        f'            case "$prev" in {sub_files or "--no-file-option"}) '
                        "_filedir; return ;; esac",
                        f'            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W '
                        f'"{words}" -- "$cur")); else _filedir; fi ;;']
            out += [f'        "") COMPREPLY=($(compgen -W "{" ".join(commands.choices)} '
                    f'{" ".join(_option_words(parser))}" -- "$cur")) ;;', "    esac"]
        out += ["}", f"complete -F {function} {name}", ""]
    return "\n".join(out)


def zsh_completion(parsers_by_name: dict[str, argparse.ArgumentParser]) -> str:
    out = ["#compdef dupfilter dupfilter-db dupfilter-milter dupfilter-smtpd",
           "# zsh completion (generated from their --help by mailfilter/cli/manuals.py)", ""]

    def specs(parser: argparse.ArgumentParser) -> list[str]:
        found = []
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._SubParsersAction):
                continue
            text = re.sub(r"[\[\]:'\\]", " ", _help(parser, action) or "")[:70].strip()
            value = ""
            if action.nargs != 0:
                kind = "_files" if re.search(r"FILE|DIR|PATH", str(action.metavar or "")) \
                    else " "
                if action.choices:
                    kind = "(" + " ".join(map(str, action.choices)) + ")"
                value = f":{action.metavar or action.dest}:{kind}"
            for flag in action.option_strings:
                found.append(f"'{flag}[{text}]{value}'")
        return found

    for name, parser in parsers_by_name.items():
        function = "_" + name.replace("-", "_")
        commands = next((a for a in parser._actions
                         if isinstance(a, argparse._SubParsersAction)), None)
        out.append(f"{function}() {{")
        if commands is None:
            out += ["  _arguments \\", *[f"    {spec} \\" for spec in specs(parser)],
                    "    '*:file:_files'"]
        else:
            helps = {c.dest: re.sub(r"[:'\\]", " ", c.help or "")[:60]
                     for c in commands._choices_actions}
            out += ["  local line state", "  _arguments -C \\",
                    *[f"    {spec} \\" for spec in specs(parser)],
                    "    '1:command:->command' '*::arg:->args'",
                    "  case $state in",
                    "    command) local -a commands; commands=("]
            out += [f"      '{command}:{helps.get(command, '')}'" for command in commands.choices]
            out += ["    ); _describe command commands ;;", "    args) case $line[1] in"]
            for command, sub in commands.choices.items():
                out += [f"      {command}) _arguments \\",
                        *[f"        {spec} \\" for spec in specs(sub)],
                        "        '*:file:_files' ;;"]
            out += ["    esac ;;", "  esac"]
        out += ["}", f"compdef {function} {name}", ""]
    return "\n".join(out)


# -------------------------------------------------------------------------------- files

def generated() -> dict[Path, str]:
    """Every generated file, by path under mailfilter/data."""
    by_name = parsers()
    files: dict[Path, Callable[[], str] | str] = {}
    for name, parser in by_name.items():
        files[DATA / "man" / "man1" / f"{name}.1"] = man_page(name, parser)
    files[DATA / "man" / "man5" / "dupfilter.toml.5"] = config_page(
        REPO / "config" / "dupfilter.toml")
    files[DATA / "completion" / "dupfilter.bash"] = bash_completion(by_name)
    files[DATA / "completion" / "_dupfilter"] = zsh_completion(by_name)
    return {path: text if isinstance(text, str) else text() for path, text in files.items()}


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = []
    for path, text in generated().items():
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"out of date: {path} (python3 -m mailfilter.cli.manuals)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
