"""The pluggable parts a study names (its data set, each set-up's network), looked up in their registries
when the study is read: a name that no registry knows, a plugin that does not import or is of the
wrong type, a network that cannot learn the data set's kind, options that fail a network's or a data
set's own schema, or a metric that cannot score the data stops the study before any job, naming the key that
named it; and each set-up's training mode (its registry's), with a network it cannot train."""

from __future__ import annotations

from typing import Any

from ganstudy.config.typed import FrozenMapping
from ganstudy.config.validate import section_problems
from ganstudy.data.kinds import DataKind, get_kind
from ganstudy.data.loaders import DATASETS, get_dataset
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import metric_problems
from ganstudy.models import NETWORKS, Network, NetworkSpec, get_network
from ganstudy.registry import Origin
from ganstudy.train.job import job_settings
from ganstudy.train.mode_needs import TRAINING_MODES, TrainingMode


def study_kind(config: dict[str, Any]) -> DataKind:
    """The kind of the study's data, by its data set's entry."""
    return get_kind(get_dataset(config["dataset"]["name"]).kind)


def part_problems(config: dict[str, Any]) -> list[str]:
    """One line per named part that cannot be used, for a validated study config."""
    name = config["dataset"]["name"]
    kind: DataKind | None = None
    try:
        kind = study_kind(config)
    except GanstudyError as error:
        problems = [f"dataset.name: {error}"]
    else:
        problems = [f"dataset.name: {problem}" for problem in kind.missing_parts()]
        problems += option_problems(
            config["dataset"],
            "options",
            f"data set '{name}'",
            get_dataset(name).options,
            DATASETS.origin(name),
            "dataset",
        )
        problems += metric_problems(kind, config["evaluation"]["metrics"], config["evaluation"]["extractor"])
    primary, metrics = config["statistics"]["primary_metric"], config["evaluation"]["metrics"]
    if primary is not None and primary not in metrics:
        problems.append(
            f"statistics.primary_metric: '{primary}' is not one of evaluation.metrics ({', '.join(metrics)}): "
            "name one of them, or null for the first"
        )
    problems += schedule_problems(config["trials"], config["setups"])
    for setup_name, setup in config["setups"].items():
        problems += _setup_problems(setup_name, setup, config["dataset"], kind)
    return problems


def schedule_problems(trials: int | dict[str, int], setups: dict[str, dict[str, Any]]) -> list[str]:
    """A schedule that cannot run: its first look at or past its most, or set-ups with trials of their own
    (every set-up takes each round's trials, so that each look compares equal counts)."""
    if isinstance(trials, int):
        return []
    problems = []
    if trials["first"] >= trials["most"]:
        problems.append(
            f"trials: first ({trials['first']}) must be below most ({trials['most']}); for a fixed number of "
            "trials write trials: N"
        )
    own = [name for name, setup in setups.items() if setup["trials"] is not None]
    if own:
        problems.append(
            f"setups.{own[0]}.trials: a study whose trials are a schedule runs every set-up on it; remove trials "
            f"from {', '.join(own)}, or make the study's trials a number"
        )
    return problems


def _setup_problems(
    setup_name: str, setup: dict[str, Any], dataset: dict[str, Any], kind: DataKind | None
) -> list[str]:
    """One set-up's mode and network: registered, installed, fit for each other and for the study's data,
    their options valid (each options section gains its schema's defaults)."""
    key = f"setups.{setup_name}.network"
    try:
        mode = TRAINING_MODES.get(setup["mode"])
    except GanstudyError as error:
        return [f"setups.{setup_name}.mode: {error}"]
    problems = [f"setups.{setup_name}.mode: {problem}" for problem in mode.missing_parts(setup["mode"])]
    problems += option_problems(
        setup,
        "mode_options",
        f"training mode '{setup['mode']}'",
        None if mode.options is None else dict(mode.options),
        TRAINING_MODES.origin(setup["mode"]),
        f"setups.{setup_name}",
    )
    try:
        network = get_network(setup["network"])
    except GanstudyError as error:
        return [*problems, f"{key}: {error}"]
    problems += _mode_problems(setup_name, setup, mode, network)
    problems += option_problems(
        setup,
        "network_options",
        f"network '{setup['network']}'",
        network.options,
        NETWORKS.origin(setup["network"]),
        f"setups.{setup_name}",
    )
    problems += _shape_problems(setup_name, setup, network, dataset)
    problems += _recipe_problems(setup_name, setup, dataset)
    if kind is not None and network.task != kind.task:
        problems.append(
            f"{key}: network '{setup['network']}' is trained by task '{network.task}', but dataset "
            f"'{dataset['name']}' holds {kind.description}, whose networks are trained by task '{kind.task}': "
            "choose a network of that task or another data set"
        )
    return problems


def _modes_for(network: Network) -> str:
    """The registered modes that can train ``network``, for a message ("single or data_parallel")."""
    fits = []
    for name in TRAINING_MODES.names():
        try:
            mode = TRAINING_MODES.get(name)
        except GanstudyError:
            continue  # a plugin's broken mode is named where a study uses it
        if mode.conditional in (None, network.conditional) and (network.task == "noise" or mode.any_task):
            fits.append(name)
    return " or ".join(fits) or "none of the registered modes"


def _mode_problems(setup_name: str, setup: dict[str, Any], mode: TrainingMode, network: Network) -> list[str]:
    """A network its set-up's mode cannot train: one that takes labels in a mode that feeds none or the
    other way round, or one of inputs other than noise in a mode that trains noise only."""
    name, mode_name = setup["network"], setup["mode"]
    unfit = []
    if network.task != "noise" and not mode.any_task:
        unfit.append(f"mode '{mode_name}' trains networks of noise only, but '{name}' maps {network.task} inputs")
    if mode.conditional is not None and network.conditional != mode.conditional:
        takes = "takes" if network.conditional else "takes no"
        feeds = "feeds" if mode.conditional else "feeds no"
        unfit.append(f"network '{name}' {takes} class labels, but mode '{mode_name}' {feeds} labels")
    return [f"setups.{setup_name}.network: {'; '.join(unfit)}: train it in mode {_modes_for(network)}"] if unfit else []


def option_problems(
    section: dict[str, Any], key: str, part: str, schema: dict[str, Any] | None, origin: Origin, where: str
) -> list[str]:
    """What is wrong with a part's options (``section[key]``, at ``where``.``key`` in the study) against
    the options ``schema`` of ``part`` (None: it takes none); the section's options gain the schema's
    defaults."""
    options = section.setdefault(key, {})
    if schema is None:
        return [f"{where}.{key}: {part} takes no options, got {sorted(options)}; remove them"] if options else []
    return [
        f"{problem} (the options schema of {part}, {origin})"
        for problem in section_problems(options, closed(schema), f"{where}.{key}")
    ]


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A part's options schema that refuses keys it does not name unless it says otherwise: JSON Schema
    allows them by default, and a misspelt option would then pass the plan and be ignored by the part."""
    if "additionalProperties" in schema or "patternProperties" in schema or schema.get("type", "object") != "object":
        return schema
    return {**schema, "additionalProperties": False}


def _shape_problems(setup_name: str, setup: dict[str, Any], network: Network, dataset: dict[str, Any]) -> list[str]:
    """A network that cannot build for the data set's images, where their shape is known before they are
    read (standard data sets; after dataset.image_size and channels)."""
    try:
        data_set = get_dataset(dataset["name"])
    except GanstudyError:
        return []  # named by part_problems
    if data_set.image_shape is None or network.fits is None or network.task != "noise":
        return []
    channels, height, width = data_set.image_shape
    size = dataset.get("image_size")
    shape = (dataset.get("channels") or channels, size or height, size or width)
    classes = (data_set.classes or 0) if network.conditional else 0
    spec = NetworkSpec(
        shape, setup["latent_dim"], setup["hidden_units"], classes, None, FrozenMapping(setup.get("network_options"))
    )
    try:
        network.fits(spec)
    except GanstudyError as error:
        return [
            f"setups.{setup_name}.network: {error} (dataset '{dataset['name']}' gives {shape[1]}x{shape[2]} images "
            f"with {shape[0]} channel(s))"
        ]
    return []


def _recipe_problems(setup_name: str, setup: dict[str, Any], dataset: dict[str, Any]) -> list[str]:
    """pix2pix's schedule and jitter where the set-up cannot follow them (keys of other tasks are dropped
    from their jobs' settings, so only the networks of the task that reads them are checked)."""
    settings, key = job_settings(setup), f"setups.{setup_name}"
    problems = []
    decay = settings.get("lr_decay_iterations") or 0
    if decay > settings["iterations"]:
        problems.append(
            f"{key}.lr_decay_iterations: {decay} is more than the set-up's {settings['iterations']} iterations: "
            "decay over at most all of them (pix2pix's recipe: iterations 200, lr_decay_iterations 100)"
        )
    if decay and settings["mode"] == "grid":
        problems.append(
            f"{key}.lr_decay_iterations: mode grid mutates each cell's learning rate (Lipizzaner's), so it "
            "follows no schedule: set lr_decay_iterations 0 or use mode single or data_parallel"
        )
    load_size, side = (settings.get("jitter") or {}).get("load_size"), dataset.get("image_size")
    if load_size is not None and side is not None and load_size < side:
        problems.append(
            f"{key}.jitter.load_size: {load_size} is smaller than the images' side (dataset.image_size {side}): "
            "resize to at least that side before cropping back to it (pix2pix: 286 for 256)"
        )
    return problems
