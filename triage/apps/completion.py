"""`vllm-triage completion bash|zsh|fish`: a completion script, built from the parser itself.

The options and subcommands come from the argparse parser and the subcommand table, so a
new flag is completed without editing a script here. Install:
  bash: vllm-triage completion bash > ~/.local/share/bash-completion/completions/vllm-triage
  zsh:  vllm-triage completion zsh > "${fpath[1]}/_vllm-triage"
  fish: vllm-triage completion fish > ~/.config/fish/completions/vllm-triage.fish
"""

from __future__ import annotations

from typing import IO

from triage.apps.exit_codes import EXIT_OK, ArgParser

SHELLS = ("bash", "zsh", "fish")


def _words() -> tuple[list[str], list[str], list[str], list[str]]:
    """(subcommands, options, formats, causes) to complete."""
    from triage.apps.cli import SUBCOMMANDS, _triage_parser
    from triage.render import FORMATS
    from triage.rule_engine.load import load_taxonomy

    options = sorted({o for action in _triage_parser()._actions for o in action.option_strings})
    return list(SUBCOMMANDS), options, list(FORMATS), sorted(load_taxonomy())


def bash() -> str:
    commands, options, formats, causes = _words()
    return f"""# vllm-triage completion for bash: source it, or put it in bash-completion's folder
_vllm_triage() {{
  local cur prev
  cur="${{COMP_WORDS[COMP_CWORD]}}"
  prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  case "$prev" in
    -f|--format) COMPREPLY=($(compgen -W "{" ".join(formats)}" -- "$cur")); return ;;
    --ignore|explain) COMPREPLY=($(compgen -W "{" ".join(causes)}" -- "$cur")); return ;;
    completion) COMPREPLY=($(compgen -W "{" ".join(SHELLS)}" -- "$cur")); return ;;
    --color) COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "{" ".join(options)}" -- "$cur"))
  elif [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "{" ".join(commands)}" -- "$cur") $(compgen -f -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _vllm_triage vllm-triage
"""


def zsh() -> str:
    commands, options, formats, causes = _words()
    return f"""#compdef vllm-triage
# vllm-triage completion for zsh: put it as _vllm-triage in a folder of $fpath
_vllm_triage() {{
  local prev=${{words[CURRENT-1]}}
  case $prev in
    -f|--format) compadd -- {" ".join(formats)}; return ;;
    --ignore|explain) compadd -- {" ".join(causes)}; return ;;
    completion) compadd -- {" ".join(SHELLS)}; return ;;
    --color) compadd -- auto always never; return ;;
  esac
  if [[ $PREFIX == -* ]]; then
    compadd -- {" ".join(options)}
  elif (( CURRENT == 2 )); then
    compadd -- {" ".join(commands)}
    _files
  else
    _files
  fi
}}
compdef _vllm_triage vllm-triage
"""


def fish() -> str:
    commands, options, formats, causes = _words()
    lines = ["# vllm-triage completion for fish: put it in ~/.config/fish/completions/vllm-triage.fish"]
    lines.append(f"complete -c vllm-triage -n __fish_use_subcommand -a '{' '.join(commands)}'")
    for option in options:
        flag = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
        lines.append(f"complete -c vllm-triage {flag}")
    lines.append(f"complete -c vllm-triage -s f -l format -x -a '{' '.join(formats)}'")
    lines.append(f"complete -c vllm-triage -l ignore -x -a '{' '.join(causes)}'")
    lines.append(f"complete -c vllm-triage -n '__fish_seen_subcommand_from explain' -x -a '{' '.join(causes)}'")
    lines.append(f"complete -c vllm-triage -n '__fish_seen_subcommand_from completion' -x -a '{' '.join(SHELLS)}'")
    return "\n".join(lines) + "\n"


def completion_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    p = ArgParser(
        prog="vllm-triage completion",
        description="Print the shell completion script for "
        "bash, zsh or fish (subcommands, options, formats and cause ids).",
    )
    p.add_argument("shell", choices=SHELLS)
    args = p.parse_args(argv)
    stdout.write({"bash": bash, "zsh": zsh, "fish": fish}[args.shell]())
    return EXIT_OK
