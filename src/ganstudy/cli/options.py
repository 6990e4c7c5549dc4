"""What the commands share: JSON and study arguments, the sub-command registry, the common options."""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ganstudy.errors import GanstudyError

if TYPE_CHECKING:
    from ganstudy.study.trials import Schedule


def json_object(text: str) -> dict[str, Any]:
    """A JSON object argument (argparse names the option in its message)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def directory_argument(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "-d",
        "--directory",
        help="with a config file: the workflow's working directory (Snakemake's --directory); default: the current "
        "folder, else the nearest folder above the config file that holds the study",
    )


def study_folder(args: argparse.Namespace) -> Path:
    """A study named by its folder, or by its name under --results-dir."""
    folder = Path(args.study)
    return folder if folder.is_dir() else Path(args.results_dir) / args.study


def named_study(args: argparse.Namespace) -> tuple[Path, dict[str, Any] | None]:
    """The folder of the study that ``args.study`` names (a config file, a folder, or a name under
    --results-dir) and, for a config, the runs it plans (status.study_runs): those, not the runs of the
    plan that another config of the same study name may have written last."""
    from ganstudy.config.schema import CONFIG_SCHEMA
    from ganstudy.config.validate import load_study_config
    from ganstudy.report.status import config_study_folder, study_runs

    folder = config_study_folder(args.study, args.directory)
    if folder is None:
        return study_folder(args), None
    config = load_study_config(args.study, CONFIG_SCHEMA)
    return folder, study_runs(config)


class Commands:
    """Adds sub-commands: a person's are listed by ``ganstudy --help``, the workflow's steps in its epilog."""

    def __init__(self, parser: argparse.ArgumentParser):
        self._sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
        # Each workflow step's parser by name: what its rule's arguments file is made from (cli.step_arguments).
        self.steps: dict[str, argparse.ArgumentParser] = {}

    def person(
        self, name: str, handler: Callable[[argparse.Namespace], None], help: str, details: str = ""
    ) -> argparse.ArgumentParser:
        """``help``: its line in ``ganstudy --help``; ``details``: the rest of its own --help's description."""
        sub = self._sub.add_parser(name, help=help, description=f"{help}{details}")
        sub.set_defaults(handler=handler)
        return sub

    def step(self, name: str, handler: Callable[[argparse.Namespace], None], help: str) -> argparse.ArgumentParser:
        # No help= : argparse lists only the sub-commands given one.
        sub = self._sub.add_parser(name, description=help)
        sub.set_defaults(handler=handler)
        self.steps[name] = sub
        return sub


def statistics_option(sub: argparse.ArgumentParser) -> None:
    """``--settings``: the study config's statistics section; a step run by hand may leave it out, or any of
    its keys, which then take the schema's defaults."""
    sub.add_argument(
        "--settings",
        type=json_object,
        default={},
        help="the study config's statistics section as JSON (keys left out: the schema's defaults)",
    )


def spec_option(sub: argparse.ArgumentParser, section: str, seeded: bool = True) -> None:
    """``--spec FILE``: the stage's spec file, the one place its settings are written (a changed setting
    rewrites it, and its stage is redone); read as ``args.spec``, a StageSpec with the config ``section``'s
    settings. ``seeded``: the step draws from the study seed, which the spec must then hold."""

    def read(path: str) -> StageSpec:
        from ganstudy.plan.study_files import spec_settings

        try:
            content = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"cannot read the spec file {path} ({exc})") from None
        if not isinstance(content, dict) or (seeded and not isinstance(content.get("seed"), int)):
            raise argparse.ArgumentTypeError(
                f"{path} is not a spec file of this step: it must be a JSON object with the {section} settings"
                + (" and the study's seed" if seeded else "")
            )
        return StageSpec(path, spec_settings(content, section), content.get("seed"))

    sub.add_argument(
        "--spec",
        type=read,
        required=True,
        help=f"the stage spec file (results/<study>/specs/) with the {section} settings",
    )


@dataclass(frozen=True)
class StageSpec:
    """What a step reads from its stage's spec file: the config section's settings and the study seed."""

    path: str
    settings: dict[str, Any]
    seed: int | None


def digits_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--digits", type=int, default=4, help="significant digits in the Markdown and LaTeX tables")


def threads_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--threads", type=int, default=1, help="CPU threads for torch")


def device_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the feature extractors run: cpu, or cuda (the job's GPU; the workflow asks for one where "
        "evaluation.extractor is a network and the site has GPUs)",
    )


def baselines_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--baselines",
        nargs="*",
        default=[],
        metavar="SETUP=BASELINE",
        help="each multi-rank set-up's one-rank run of the same work",
    )


def baselines(pairs: list[str]) -> dict[str, str]:
    try:
        return dict(pair.split("=", 1) for pair in pairs)
    except ValueError:
        raise GanstudyError(f"--baselines takes SETUP=BASELINE pairs, got {pairs}") from None


class _Version(argparse.Action):
    """--version: asks git only when given, not at every step's start."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, help="the version and the git commit of this checkout")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from ganstudy.core.code_version import version_text

        print(version_text())
        parser.exit()


def command_parser(registers: Sequence[Callable[[Commands], None]]) -> tuple[argparse.ArgumentParser, Commands]:
    """``ganstudy``'s parser with the commands that ``registers`` add (each stage module's ``register``), and
    the commands, whose workflow steps' parsers declare what each step's arguments file holds."""
    # @FILE reads arguments from FILE, one per line: how the workflow passes a step its arguments
    # (results/<study>/arguments/<job>.args), so that a rule's command stays short.
    parser = argparse.ArgumentParser(
        prog="ganstudy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        fromfile_prefix_chars="@",
        description="A GAN study's tools. Run a study with Snakemake (README.md); these commands look at it.",
    )
    parser.add_argument("--version", action=_Version)
    commands = Commands(parser)
    for register in registers:
        register(commands)
    parser.epilog = (
        "workflow steps (each one rule of the Snakemake workflow; `ganstudy STEP --help`):\n"
        + textwrap.fill(
            ", ".join(commands.steps), width=100, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
        )
    )
    return parser, commands


def schedule_argument(text: str) -> Schedule:
    """A schedule option (``Schedule.parse``), its problem said as argparse says a bad value's."""
    from ganstudy.study.trials import Schedule

    try:
        return Schedule.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
