"""The grid's pieces without MPI: topology, layout, evolutionary operators, mixtures."""

import numpy as np
import pytest
import torch

from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import MixtureGenerator, proportional_counts
from ganstudy.parallel.topology import GridShape, assign_cells, resolve_shape
from ganstudy.train.grid.cell import CellStreams
from ganstudy.train.grid.population import mutate_learning_rates, replace_worst, tournament
from ganstudy.train.job import job_settings

# Hand-written: cell -> [self, W, N, E, S] without repeats, rows wrap top-bottom, columns left-right.
NEIGHBOURS_3x3 = {
    (0, 0): [(0, 0), (0, 2), (2, 0), (0, 1), (1, 0)],
    (1, 1): [(1, 1), (1, 0), (0, 1), (1, 2), (2, 1)],
    (2, 2): [(2, 2), (2, 1), (1, 2), (2, 0), (0, 2)],
    (0, 1): [(0, 1), (0, 0), (2, 1), (0, 2), (1, 1)],
}
# 2 rows x 3 columns: N and S are the same row; W and E differ. A transposed implementation fails here.
NEIGHBOURS_2x3 = {
    (0, 0): [(0, 0), (0, 2), (1, 0), (0, 1)],
    (0, 2): [(0, 2), (0, 1), (1, 2), (0, 0)],
    (1, 1): [(1, 1), (1, 0), (0, 1), (1, 2)],
}
NEIGHBOURS_2x2 = {(0, 0): [(0, 0), (0, 1), (1, 0)], (1, 1): [(1, 1), (1, 0), (0, 1)]}
NEIGHBOURS_1x3 = {(0, 0): [(0, 0), (0, 2), (0, 1)]}


@pytest.mark.parametrize(
    "shape, table",
    [
        (GridShape(3, 3), NEIGHBOURS_3x3),
        (GridShape(2, 3), NEIGHBOURS_2x3),
        (GridShape(2, 2), NEIGHBOURS_2x2),
        (GridShape(1, 3), NEIGHBOURS_1x3),
        (GridShape(1, 1), {(0, 0): [(0, 0)]}),
    ],
)
def test_neighbourhoods_match_the_hand_written_tables(shape, table):
    for cell, expected in table.items():
        assert shape.neighbourhood(cell) == expected


def test_neighbourhood_is_symmetric_on_rectangular_grids():
    shape = GridShape(3, 5)
    for cell in shape.cells():
        for other in shape.neighbourhood(cell):
            assert cell in shape.neighbourhood(other)


# Hand-written: a ring of 9 cells, radius 2: cell -> [self, W1, E1, W2, E2], wrapping at both ends.
RING_9_RADIUS_2 = {
    (0, 0): [(0, 0), (0, 8), (0, 1), (0, 7), (0, 2)],
    (0, 1): [(0, 1), (0, 0), (0, 2), (0, 8), (0, 3)],
    (0, 4): [(0, 4), (0, 3), (0, 5), (0, 2), (0, 6)],
    (0, 8): [(0, 8), (0, 7), (0, 0), (0, 6), (0, 1)],
}


def test_a_rings_neighbourhoods_match_the_hand_written_table_and_radius_1_is_the_torus_of_one_row():
    ring = GridShape(1, 9, "ring", 2)
    for cell, expected in RING_9_RADIUS_2.items():
        assert ring.neighbourhood(cell) == expected
    # Every cell has 2r+1 distinct neighbours, each of which has it back (a ring is symmetric).
    for radius, cells in ((1, 3), (2, 5), (3, 7), (4, 9), (3, 12)):
        shape = GridShape(1, cells, "ring", radius)
        for cell in shape.cells():
            around = shape.neighbourhood(cell)
            assert len(around) == len(set(around)) == 2 * radius + 1
            assert all(cell in shape.neighbourhood(other) for other in around)
    for cells in (3, 4, 7):
        torus, line = GridShape(1, cells), GridShape(1, cells, "ring", 1)
        assert all(torus.neighbourhood(cell) == line.neighbourhood(cell) for cell in torus.cells())
    assert str(ring) == "1x9" and ring.describe() == "ring of 9, radius 2" and GridShape(3, 3).describe() == "3x3 torus"


@pytest.mark.parametrize(
    "spec, ranks, radius, message",
    [
        ("3x3", 9, 1, r"a ring's cells lie in one row, write grid.shape 1x9"),
        (
            "1x4",
            4,
            2,
            r"grid.ring_radius 2 on a ring of 4 cells: .* needs 5 cells .*; set grid.ring_radius to at most 1",
        ),
        ("1x2", 2, 1, r"grid.ring_radius 1 on a ring of 2 cells: .*; give the ring at least 3 cells"),
        ("auto", 6, 3, r"grid.ring_radius 3 on a ring of 6 cells: .* set grid.ring_radius to at most 2"),
    ],
)
def test_a_ring_that_cannot_be_laid_out_is_refused_naming_the_key(spec, ranks, radius, message):
    with pytest.raises(GanstudyError, match=message):
        resolve_shape(spec, ranks, 1, 1024, "ring", radius)


def test_an_auto_ring_has_a_cell_per_rank_up_to_max_cells():
    assert resolve_shape("auto", 7, 1, 1024, "ring", 2) == GridShape(1, 7, "ring", 2)
    assert resolve_shape("auto", 40, 1, 9, "ring", 1) == GridShape(1, 9, "ring", 1)


@pytest.mark.parametrize(
    "ranks, shape",
    [(1, "1x1"), (2, "2x1"), (3, "1x2"), (4, "2x2"), (5, "2x2"), (6, "3x2"), (7, "2x3"), (9, "3x3"), (10, "3x3")],
)
def test_auto_shape_follows_the_thesis_rule(ranks, shape):
    # w = round(sqrt(n)) columns, h = n // w rows.
    assert str(resolve_shape("auto", ranks, 1, 1024)) == shape


def test_auto_shape_is_capped_by_max_cells():
    assert str(resolve_shape("auto", 40, 1, 9)) == "3x3"


def test_too_few_ranks_for_min_cells_names_the_problem():
    with pytest.raises(
        GanstudyError, match=r"fewer than grid.min_cells=9: 4 MPI ranks are too few; launch at least 9 ranks"
    ):
        resolve_shape("auto", 4, 9, 1024)


@pytest.mark.parametrize("spec", ["3by3", "0x2", "x3"])
def test_bad_shape_spec(spec):
    with pytest.raises(GanstudyError, match="neither 'auto' nor ROWSxCOLS"):
        resolve_shape(spec, 1, 1, 1024)


def test_fixed_shape_outside_the_bounds():
    with pytest.raises(GanstudyError, match="more than grid.max_cells=8"):
        resolve_shape("3x3", 1, 1, 8)


def test_cells_are_spread_evenly_in_row_major_blocks():
    blocks = assign_cells(GridShape(3, 3), 2)
    assert blocks == [[(0, 0), (0, 1), (0, 2), (1, 0)], [(1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]]
    assert [len(b) for b in assign_cells(GridShape(4, 4), 3)] == [5, 5, 6]
    assert assign_cells(GridShape(2, 2), 6) == [[(0, 0)], [(0, 1)], [(1, 0)], [(1, 1)], [], []]


def test_tournament_picks_the_fitter_entrant():
    rng = np.random.default_rng(0)
    fitness = [3.0, 1.0, 2.0]
    # With the whole population in the tournament the best always wins.
    assert tournament(fitness, 4, 3, rng) == [1, 1, 1, 1]
    # Size 2 on three: the worst (index 0) can never win.
    winners = tournament(fitness, 300, 2, rng)
    assert 0 not in winners and {1, 2} == set(winners)
    assert winners.count(1) == pytest.approx(200, abs=40)  # pairs {0,1} {0,2} {1,2} are equally likely: 1 wins two
    assert tournament([5.0], 2, 2, rng) == [0, 0]  # a neighbourhood of one


def test_learning_rate_mutation_follows_lipizzaners_rule():
    lr0, alpha = 2e-4, 1e-4
    lrs = np.array([[lr0, 3e-4, 1e-12]])
    normals, uniforms = np.array([[0.5, -1.0, -3.0]]), np.array([[0.2, 0.7, 0.1]])
    # Applied where the uniform draw is below p: lr + alpha * (lr0 * n - lr0 / 10), never below 0.
    mutated = mutate_learning_rates(lrs, lr0, alpha, 0.5, normals, uniforms)
    assert mutated[0, 0] == pytest.approx(lr0 + alpha * (lr0 * 0.5 - lr0 / 10), rel=1e-15)
    assert mutated[0, 1] == 3e-4
    assert mutate_learning_rates(lrs, lr0, 1e6, 1.0, normals, uniforms)[0, 2] == 0.0
    assert np.array_equal(mutate_learning_rates(lrs, lr0, alpha, 0.0, normals, uniforms), lrs)


def test_replacement_puts_the_best_new_in_place_of_the_worst():
    local = [{"fitness": 1.0, "id": "a"}, {"fitness": 5.0, "id": "b"}, {"fitness": 3.0, "id": "c"}]
    new = [{"fitness": 4.0, "id": "x"}, {"fitness": 2.0, "id": "y"}]
    assert [p["id"] for p in replace_worst(local, new, 1)] == ["a", "y", "c"]
    assert [p["id"] for p in replace_worst(local, new, 2)] == ["a", "y", "x"]
    # Population of one: the trained individual always takes the place, even when it scores worse.
    assert replace_worst([{"fitness": 0.1, "id": "old"}], [{"fitness": 9.0, "id": "new"}], 1)[0]["id"] == "new"


def test_conditional_replacement_keeps_a_local_individual_that_is_better_than_its_replacer():
    local = [{"fitness": 1.0, "id": "a"}, {"fitness": 5.0, "id": "b"}, {"fitness": 3.0, "id": "c"}]
    new = [{"fitness": 4.0, "id": "x"}, {"fitness": 2.0, "id": "y"}, {"fitness": 6.0, "id": "z"}]
    # Best new y (2.0) against the worst local b (5.0): replaced.
    assert [p["id"] for p in replace_worst(local, new, 1, only_better=True)] == ["a", "y", "c"]
    # y against c (3.0) and x (4.0) against b (5.0): both replaced; z is not among the 2 best new.
    assert [p["id"] for p in replace_worst(local, new, 2, only_better=True)] == ["a", "y", "x"]
    # y (2.0) against a (1.0): kept; x against c: kept (4.0 > 3.0); z (6.0) against b (5.0): kept.
    assert [p["id"] for p in replace_worst(local, new, 3, only_better=True)] == ["a", "c", "b"]
    assert (
        replace_worst([{"fitness": 0.1, "id": "old"}], [{"fitness": 9.0, "id": "new"}], 1, only_better=True)[0]["id"]
        == "old"
    )
    assert (
        replace_worst([{"fitness": 0.1, "id": "old"}], [{"fitness": 0.1, "id": "new"}], 1, only_better=True)[0]["id"]
        == "old"
    )


@pytest.mark.parametrize(
    "weights, total", [([0.5, 0.5], 7), ([0.2, 0.3, 0.5], 1000), ([1.0], 5), ([0.0, 1.0, 0.0], 9), ([1, 1, 1], 10)]
)
def test_proportional_counts_sum_to_the_total_and_stay_within_one_of_exact(weights, total):
    counts = proportional_counts(weights, total)
    assert sum(counts) == total
    exact = np.asarray(weights) / np.sum(weights) * total
    assert np.all(np.abs(np.asarray(counts) - exact) < 1)


def test_which_component_makes_which_sample_does_not_depend_on_the_batch_size():
    spec = NetworkSpec((1, 8, 8), 8, 16)
    torch.manual_seed(0)
    mixture = MixtureGenerator([build_pair("perceptron4", spec)[0] for _ in range(3)], [0.2, 0.5, 0.3])
    z = torch.randn(101, 8)
    with torch.no_grad():
        whole, batched = mixture(z), mixture(z, batch_size=7)
    # Equal up to float summation order (matrix kernels block differently for other row counts).
    torch.testing.assert_close(whole, batched, rtol=0, atol=1e-6)
    # Component k makes its share of z in order: the first 20 rows come from component 0.
    with torch.no_grad():
        torch.testing.assert_close(whole[:20], mixture.components[0](z[:20]), rtol=0, atol=1e-6)


def _masks(streams: CellStreams, count: int = 2) -> list[torch.Tensor]:
    """``count`` dropout masks of the cell, each in its own spell of the cell's work."""
    masks = []
    for _ in range(count):
        with streams.dropout.active():
            masks.append(torch.nn.functional.dropout(torch.ones(64), 0.5) > 0)
    return masks


def test_a_cells_dropout_stream_goes_on_from_spell_to_spell_whatever_ran_between():
    cpu = torch.device("cpu")
    alone = _masks(CellStreams(5, 1, (0, 1), cpu))
    assert not torch.equal(alone[0], alone[1])  # the second spell goes on, it does not start over
    ours, other = CellStreams(5, 1, (0, 1), cpu), CellStreams(5, 1, (1, 0), cpu)
    torch.manual_seed(123)
    # Another cell's spell and a draw from the global generator between this cell's spells.
    first, theirs = _masks(ours, 1)[0], _masks(other, 1)[0]
    torch.rand(3)
    second = _masks(ours, 1)[0]
    assert torch.equal(first, alone[0]) and torch.equal(second, alone[1]) and not torch.equal(theirs, first)
    # The spells leave the global generator as they found it.
    after = torch.get_rng_state()
    torch.manual_seed(123)
    torch.rand(3)
    assert torch.equal(after, torch.get_rng_state())


def test_a_cells_dropout_stream_resumes_from_its_checkpoint_state():
    cpu = torch.device("cpu")
    whole = _masks(CellStreams(5, 1, (0, 1), cpu), 3)
    first = CellStreams(5, 1, (0, 1), cpu)
    _masks(first, 1)
    resumed = CellStreams(5, 1, (0, 1), cpu)
    resumed.load(first.state())
    assert all(torch.equal(a, b) for a, b in zip(_masks(resumed), whole[1:]))


def test_states_cross_the_wire_as_numpy_arrays_and_arrive_as_the_same_tensors():
    import pickle

    from ganstudy.parallel.exchange import from_wire, to_wire

    state = {
        "params": {"w": torch.randn(3, 4), "count": torch.tensor(5), "half": torch.randn(2, dtype=torch.bfloat16)},
        "adam": {"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [{"lr": 1e-3, "params": [0]}]},
        "lr": 0.1,
        "origin": "0-1/G0",
        "pair": (torch.ones(2), 7),
    }
    wire = to_wire(state)
    # Every tensor numpy can hold goes as an array; bfloat16, which numpy lacks, as the tensor it is.
    assert not torch.is_tensor(wire["params"]["w"]) and torch.is_tensor(wire["params"]["half"])
    back = from_wire(pickle.loads(pickle.dumps(wire, protocol=5)), torch.device("cpu"))

    def flat(s):
        return [
            s["params"]["w"],
            s["params"]["count"],
            s["params"]["half"],
            s["adam"]["state"][0]["step"],
            s["pair"][0],
        ]

    for got, sent in zip(flat(back), flat(state)):
        assert got.dtype == sent.dtype and got.shape == sent.shape and torch.equal(got, sent)
    assert (
        back["adam"]["param_groups"] == state["adam"]["param_groups"]
        and back["origin"] == state["origin"]
        and back["pair"][1] == 7
    )
    back["params"]["w"].add_(1)  # writable, as an unpickled tensor is


@pytest.mark.parametrize("loss", ["bce", "mustangs"])
def test_a_pass_drawn_in_blocks_of_updates_draws_what_one_update_at_a_time_does(loss, monkeypatch):
    from types import SimpleNamespace

    from conftest import SCHEMA
    from ganstudy.config.setup_settings import TrainingSettings
    from ganstudy.config.validate import validate_study_config
    from ganstudy.train.grid import draws as grid_draws
    from ganstudy.train.losses import LOSSES

    section = {
        "mode": "grid",
        "loss": loss,
        "batch_size": 5,
        "lr": 0.001,
        "grid": {"shape": "1x3", "mutation_probability": 0.5, "mutation_rate": 0.01},
    }
    setup = TrainingSettings.of(job_settings(validate_study_config({"setups": {"s": section}}, SCHEMA)["setups"]["s"]))
    spec = NetworkSpec((1, 4, 4), latent_dim=6, hidden_units=8)
    cells = [
        SimpleNamespace(
            setup=setup,
            spec=spec,
            device=torch.device("cpu"),
            loss=LOSSES.get("bce"),
            streams=SimpleNamespace(draw_seed=seed),
        )
        for seed in (11, 12, 13)
    ]
    steps, attackers, opponents = 7, 2, [1, 2, 3]

    def drawn(draws):
        lrs, made = np.full((3, attackers), 0.001), []
        for step in range(steps):
            update = draws.update(step, "d", lrs, opponents)
            lrs = update.lrs
            made.append((update.defenders, list(update.losses), update.lrs, update.noise.clone()))
        return made

    # Blocks of 3 updates (the last one short) against a block per update.
    monkeypatch.setitem(grid_draws.BLOCK_FLOATS, "cache", 3 * 3 * attackers * 5 * 6)
    blocks = drawn(grid_draws.GridDraws(cells, 4, False, steps))
    alone = drawn(grid_draws.GridDraws(cells, 4, False))
    # The whole layout's draws: the pass in one block, the noise in one pass of operators.
    whole = drawn(grid_draws.GridDraws(cells, 4, True, steps))
    for (defenders, losses, lrs, noise), (defenders1, losses1, lrs1, noise1), (_, _, lrs2, noise2) in zip(
        blocks, alone, whole
    ):
        assert np.array_equal(lrs, lrs2) and torch.equal(noise, noise2)
        assert (
            defenders == defenders1 and losses == losses1 and np.array_equal(lrs, lrs1) and torch.equal(noise, noise1)
        )
        assert all(d < n for d, n in zip(defenders, opponents)) and noise.shape == (3 * attackers, 5, 6)
    assert len({tuple(d) for d, *_ in blocks}) > 1 and not torch.equal(blocks[0][3], blocks[1][3])
    if loss == "mustangs":
        assert len({id(chosen) for _, losses, *_ in blocks for chosen in losses}) > 1
