"""A flag `qm` does not take, refused by the command it was given to: that command's usage, and
for a flag Slurm's tools take, what qm does instead (`--gres`: `--gpus N` and `--gpu-type`); for a
misspelled one, the flag meant. argparse refused every unknown flag with `qm`'s own usage
(`qm [-h] [--url URL] [--json] COMMAND ...`), which lists none of the command's flags. A command
qm does not have is refused alike (`Parser`): for a Slurm tool's name, the qm command doing its
work (`qm sbatch`: `qm submit`); for a misspelling, the command meant."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from typing import NoReturn

_JOB_BY_ID = "qm names a job without -j: qm status JOB (scontrol show job), qm runs JOB (sacct -j), qm sprio JOB"
_OUTPUT = "a job's output is kept for you: qm logs JOB (-f follows it)"
_MAIL = "webhooks tell you instead: qm notify add URL --events begin,end,fail"
_FORMAT = "--json prints any command's answer as the API's JSON (qm history --format csv for a CSV)"
_PASSWORD = ("qm login takes no password on its command line, where shell history and `ps` keep it: type it "
             "when asked, pipe it with --password-stdin, or set $QM_PASSWORD")
_NODES = "give --gpus N and --gpus-per-node 8: the scheduler chooses the nodes (a gang gets whole nodes)"

#: Slurm's flags (sbatch, squeue, sacct, scancel) that qm does not take, and what it does instead.
#: The ones qm takes under Slurm's names too (-J, -G, -A, --me, --wrap, --mem-per-gpu) are flags.
INSTEAD = {
    "-j": _JOB_BY_ID, "--jobs": _JOB_BY_ID,
    "-N": _NODES, "--nodes": _NODES, "--exclusive": _NODES,
    "--ntasks-per-node": "give --gpus N, --gpus-per-node M and --distinct-nodes: each member of M GPUs on a node of "
                         "its own (without it, members are packed)",
    "--gres": "give --gpus N and --gpu-type TYPE (qm sinfo lists the types)",
    "--gpus-per-task": "give --gpus N and --gpus-per-node N",
    "--partition": "give --gpu-type TYPE: each pool is one GPU type (qm sinfo lists them)",
    "-q": "give --priority CLASS (qm config lists the classes)", "--qos": "give --priority CLASS (qm config lists the classes)",
    "-c": "give --cpus-per-gpu N", "--cpus-per-task": "give --cpus-per-gpu N",
    "--mem": "give --memory-per-gpu GB (per GPU, not per node)",
    "--begin": "submit it held (--hold) and `qm release JOB` when it may start",
    "--mail-type": _MAIL, "--mail-user": _MAIL,
    "-o": _OUTPUT, "--output": _OUTPUT, "--error": _OUTPUT,
    "--format": _FORMAT, "-O": _FORMAT, "--Format": _FORMAT, "--parsable2": _FORMAT,
    "-l": "qm status JOB says every field of a job", "--long": "qm status JOB says every field of a job",
    "--start": "qm list's START column is each waiting job's expected start; qm explain JOB says why",
    "-X": "qm history has one line a job already; qm runs JOB lists each of its runs",
    "-w": "qm list --node NODE lists the jobs on a node; a job cannot be pinned to nodes",
    "--nodelist": "qm list --node NODE, qm history --node NODE; a job cannot be pinned to nodes",
    "--password": _PASSWORD,  # not Slurm's, but typed as often
}

#: Flags qm takes for something other than Slurm's flag of that spelling: said under a refusal of
#: what the flag set when it was typed so (`qm submit -p gpu`, sbatch's partition, was refused
#: with the priority classes alone).
TYPED_AS_SLURMS = {
    "-p": "-p is qm's priority class (--priority), not Slurm's partition: to choose a pool, "
          + INSTEAD["--partition"],
}


def flags_typed(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str]) -> dict[str, str]:
    """Each of the command's flags given, by its dest, spelled as typed (the last given, which
    argparse keeps): `--mem-per-gpu` where `--memory-per-gpu` sets the same field, `-t` for
    `--time`, `-t8d` too. A beginning of a flag that argparse completed is left out (the refusal
    then names the flag's first spelling)."""
    options = {option: action.dest for action in _chosen(parser, args)._actions for option in action.option_strings}
    typed: dict[str, str] = {}
    for word in argv:
        flag = _flag_of(word)
        if flag is None:
            continue
        if flag in options:
            typed[options[flag]] = flag
        elif not flag.startswith("--") and flag[:2] in options:  # a short flag with its value: -t8d
            typed[options[flag[:2]]] = flag[:2]
    return typed


#: Slurm's tools qm has no command of that name for (squeue, scancel, sacct, sinfo, sprio and
#: sshare it has), and near names a person types, with the qm command that does their work.
COMMAND_INSTEAD = {
    "sbatch": "qm submit (its flags are sbatch's: -J, -G, -t, -A, --wrap; qm submit --help)",
    "srun": "qm submit, then qm logs JOB -f --exit-with-job to follow it and exit as it did",
    "salloc": "qm submit --workload interactive -- COMMAND: a job is its command, and holds its GPUs while it runs",
    "scontrol": "qm status JOB (show job), qm hold, release, requeue and update JOB",
    "sattach": "qm logs JOB -f",
    "sstat": "qm status JOB (its progress and last checkpoint), qm logs JOB",
    "sreport": "qm showback (GPU-hours and cost by team, project, job or class)",
    "queue": "qm list (squeue): your team's waiting and running jobs, each with its place and start",
}

_INVALID_COMMAND = re.compile(r"argument [A-Z]+: invalid choice: '([^']*)'")


class Parser(argparse.ArgumentParser):
    """qm's parsers: a command (or a subcommand: `qm notify ad`) that is none is refused as
    argparse does, exit 2 with the usage and the commands, and under them what to type instead:
    a Slurm tool's qm command (COMMAND_INSTEAD) or the closest command's name."""

    def error(self, message: str) -> NoReturn:
        typed = _INVALID_COMMAND.match(message)
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        if typed and subs:
            word, names = typed.group(1), list(subs[0].choices)
            close = difflib.get_close_matches(word, names, n=1, cutoff=0.7)
            if self.prog == "qm" and word in COMMAND_INSTEAD:
                message += f"\n  {word}: {COMMAND_INSTEAD[word]}"
            elif close:
                message += f"\n  {word}: did you mean {self.prog} {close[0]}?"
        super().error(message)


def _flag_of(word: str) -> str | None:
    """The flag a word of the command line names (`--gres=gpu:8`: `--gres`), or None for a value."""
    if not word.startswith("-") or word == "-" or word[1:2].isdigit():
        return None
    return word.split("=", 1)[0]


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's own parser: `qm notify add`'s, not `qm`'s."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if not subs or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: Sequence[str]) -> NoReturn:
    """Exit 2 with the command's usage, the words it does not take, and under them, flag by flag,
    what to type instead: Slurm's way (INSTEAD) or the command's closest flag."""
    chosen = _chosen(parser, args)
    known = [option for action in chosen._actions for option in action.option_strings if option.startswith("--")]
    lines = [f"unrecognized arguments: {' '.join(extras)}"]
    for flag in dict.fromkeys(f for f in map(_flag_of, extras) if f):
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75) if flag.startswith("--") else []
        if flag in INSTEAD:
            lines.append(f"  {flag}: {INSTEAD[flag]}")
        elif close:
            lines.append(f"  {flag}: did you mean {close[0]}?")
    lines.append(f"  (`{chosen.prog} --help` lists its flags)")
    chosen.error("\n".join(lines))


def refuse_shortened(parser: argparse.ArgumentParser, args: argparse.Namespace, sentence: str) -> NoReturn:
    """Exit 2 with the command's usage and `sentence`: a flag's beginning that argparse took for
    the whole flag, which qm does not."""
    chosen = _chosen(parser, args)
    chosen.error(f"{sentence}\n  (`{chosen.prog} --help` lists its flags)")
