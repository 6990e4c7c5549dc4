"""Stacked networks and players (batched grid cells): the same functions as the lone networks and
torch's Adam, and a row's bits independent of the rows that share its stack."""

from __future__ import annotations

import copy
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from ganstudy.evaluate.fid import FidScorer
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.mixture import MixtureGenerator, proportional_counts
from ganstudy.models.stacked import StackedMLP
from ganstudy.models.stacked_network import StackedNetwork
from ganstudy.parallel.dispatch import OperatorCounter, counting_host_reads
from ganstudy.train.grid.draws import MUSTANGS_LOSSES, GridDraws
from ganstudy.train.grid.iteration import LoopEngine, StackedEvaluationEngine
from ganstudy.train.grid.mixture_es import MixtureStep, candidate_fids
from ganstudy.train.grid.mode import _why_not_trained_stacked
from ganstudy.train.grid.population import Individual
from ganstudy.train.grid.stacked import FitnessCase, StackedEngine, StackedPlayers, UpdateInputs, fitness_losses
from ganstudy.train.job import job_settings
from ganstudy.train.losses import LOSSES

CPU = torch.device("cpu")
SPECS = [NetworkSpec((1, 8, 8), 16, 32), NetworkSpec((1, 7, 3), 5, 37)]


def pairs(spec: NetworkSpec, count: int, seed: int = 0):
    torch.manual_seed(seed)
    return [build_pair("perceptron4", spec) for _ in range(count)]


@pytest.mark.parametrize("spec", SPECS, ids=["digits", "odd"])
def test_stacked_networks_compute_what_the_lone_networks_compute(spec):
    nets = pairs(spec, 3)
    g_net, d_net = nets[0][0].stacked(), nets[0][1].stacked()
    g_params = g_net.stack([g.state_dict() for g, _ in nets], CPU)
    d_params = d_net.stack([d.state_dict() for _, d in nets], CPU)
    z = torch.randn(3, 11, spec.latent_dim)
    fakes = g_net(g_params, z)
    assert fakes.shape == (3, 11, *spec.image_shape)
    scores = d_net(d_params, fakes)
    assert scores.shape == (3, 11)
    for row, (g, d) in enumerate(nets):
        torch.testing.assert_close(fakes[row], g(z[row]), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(scores[row], d(g(z[row])), rtol=1e-5, atol=1e-6)
        # The lone layout comes back: a row's state loads into the lone network unchanged.
        assert all(torch.equal(a, b) for a, b in zip(g_net.states(g_params)[row].values(), g.state_dict().values()))


def test_stacked_tanh_is_tanh_in_value_and_gradient():
    tanh = StackedMLP.of(nn.Sequential(nn.Linear(1, 1), nn.Tanh()), "", ()).activations[0]
    x = torch.cat([torch.linspace(-12, 12, 100_001), torch.tensor([-100.0, -1e-8, 0.0, 1e-8, 100.0])]).requires_grad_()
    # As in the network: applied (in place) to a layer's fresh output.
    y = tanh(x * 1)
    exact = torch.tanh(x.detach().double())
    assert (y.detach().double() - exact).abs().max() < 2e-7
    assert y[-5:].tolist() == [-1.0, pytest.approx(0.0, abs=1e-7), 0.0, pytest.approx(0.0, abs=1e-7), 1.0]
    y.backward(torch.full_like(x, 3.0))
    torch.testing.assert_close(x.grad.double(), 3 * (1 - exact**2), rtol=0, atol=2e-6)


@pytest.mark.parametrize("spec", SPECS, ids=["digits", "odd"])
@pytest.mark.parametrize("samples", [50, 23])
def test_a_row_gives_the_same_bits_in_any_stack(spec, samples, one_thread):
    nets = pairs(spec, 5)
    g_net, d_net = nets[0][0].stacked(), nets[0][1].stacked()
    z = torch.randn(5, samples, spec.latent_dim)
    outcomes = {}
    for size in (1, 2, 5):
        g_params = [p.requires_grad_() for p in g_net.stack([g.state_dict() for g, _ in nets[-size:]], CPU)]
        d_params = d_net.stack([d.state_dict() for _, d in nets[-size:]], CPU)
        out = d_net(d_params, g_net(g_params, z[-size:]))
        LOSSES.get("bce").generator(out).sum().backward()
        # The last row is the same network on the same noise in every stack.
        outcomes[size] = [out[-1].detach()] + [p.grad[-1] for p in g_params]
    for size in (2, 5):
        assert all(torch.equal(a, b) for a, b in zip(outcomes[1], outcomes[size]))


@pytest.mark.parametrize("row_by_row", [True, False], ids=["row-by-row", "whole-stack"])
def test_stacked_adam_follows_torch_adam_row_by_row_and_round_trips_its_state(row_by_row):
    spec = SPECS[1]
    generators = [g for g, _ in pairs(spec, 2)]
    lrs = [1e-3, 3e-4]
    optimizers = [
        torch.optim.Adam(g.parameters(), lr=lr, betas=(0.5, 0.999), foreach=False) for g, lr in zip(generators, lrs)
    ]
    # Row 0 starts fresh, row 1 with moments from two earlier steps.
    for _ in range(2):
        optimizers[1].zero_grad()
        generators[1](torch.randn(4, spec.latent_dim)).square().mean().backward()
        optimizers[1].step()
    payloads = [
        Individual(g, o, lr, 0.0, f"x/G{k}").payload() for k, (g, o, lr) in enumerate(zip(generators, optimizers, lrs))
    ]
    net = generators[0].stacked()
    players = StackedPlayers(net, payloads, (0.5, 0.999), torch.device("cpu"), row_by_row)
    for _ in range(3):
        z = torch.randn(2, 6, spec.latent_dim)
        net(players.params, z).square().mean(dim=(1, 2, 3, 4)).sum().backward()
        players.step()
        for row, (g, o) in enumerate(zip(generators, optimizers)):
            o.zero_grad()
            g(z[row]).square().mean().backward()
            o.step()
    made = players.payloads([{"fitness": 0.5, "origin": f"x/G{row}"} for row in range(2)])
    for row, g in enumerate(generators):
        for name, value in net.states(players.params)[row].items():
            torch.testing.assert_close(value, g.state_dict()[name], rtol=1e-5, atol=1e-7)
        payload = made[row]
        assert [float(s["step"]) for s in payload["adam"]["state"].values()] == [[3, 5][row]] * len(net.names)
        assert payload["lr"] == lrs[row] and payload["fitness"] == 0.5 and payload["origin"] == f"x/G{row}"
        # The payload is a lone network's: torch's Adam takes its state and carries on.
        clone = copy.deepcopy(g)
        clone.load_state_dict(payload["params"])
        optimizer = torch.optim.Adam(clone.parameters(), lr=lrs[row], betas=(0.5, 0.999))
        optimizer.load_state_dict(payload["adam"])
        torch.testing.assert_close(
            optimizer.state_dict()["state"][0]["exp_avg"],
            optimizers[row].state_dict()["state"][0]["exp_avg"],
            rtol=1e-5,
            atol=1e-9,
        )


@pytest.mark.parametrize("row_by_row", [True, False], ids=["row-by-row", "whole-stack"])
def test_stacked_adam_gives_a_row_the_same_bits_in_any_stack(row_by_row, one_thread):
    spec = SPECS[1]
    generators = [g for g, _ in pairs(spec, 3)]
    payloads = [
        Individual(g, torch.optim.Adam(g.parameters(), lr=1e-3), lr, 0.0, "x/G").payload()
        for g, lr in zip(generators, [1e-3, 2e-4, 5e-4])
    ]
    net = generators[0].stacked()
    z = torch.randn(3, 6, spec.latent_dim)
    outcomes = []
    for size in (1, 3):
        players = StackedPlayers(net, payloads[-size:], (0.5, 0.999), CPU, row_by_row)
        for _ in range(3):
            net(players.params, z[-size:]).square().mean(dim=(1, 2, 3, 4)).sum().backward()
            players.step()
        outcomes.append([p[-1].detach() for p in players.params + players.exp_avg + players.exp_avg_sq])
    assert all(torch.equal(a, b) for a, b in zip(*outcomes))


def test_fitness_losses_are_the_losses_of_every_pair():
    spec = SPECS[0]
    loss = LOSSES.get("bce")
    nets = pairs(spec, 3)
    cases = []
    for c in range(2):
        real = torch.rand(20, *spec.image_shape) * 2 - 1
        payloads = [{"params": g.state_dict()} for g, _ in nets], [{"params": d.state_dict()} for _, d in nets[:2]]
        cases.append(FitnessCase(*payloads, real, torch.randn(20, spec.latent_dim), generators_only=c == 1))
    results = fitness_losses(cases, nets[0][0].stacked(), nets[0][1].stacked(), loss)
    with torch.no_grad():
        for case, (g_losses, d_losses) in zip(cases, results):
            assert g_losses.shape == (3, 2)
            # A case that wants the generators' losses alone gets no discriminator losses.
            assert (d_losses is None) == case.generators_only
            for i, (g, _) in enumerate(nets):
                for j, (_, d) in enumerate(nets[:2]):
                    fake = g(case.z)
                    assert g_losses[i, j] == pytest.approx(float(loss.generator(d(fake))), rel=1e-5)
                    if d_losses is not None:
                        assert d_losses[j, i] == pytest.approx(
                            float(loss.discriminator(d(case.real), d(fake))), rel=1e-5
                        )
    assert np.isfinite(results[0][0]).all()


# --- the mixture ES: candidates scored on shared span images --------------------------------------
CANDIDATES = {
    "es-step": [np.array([0.3, 0.1, 0.2, 0.4, 0.0]), np.array([0.29, 0.12, 0.2, 0.38, 0.01])],
    "far-apart": [np.array([0.7, 0.1, 0.1, 0.1, 0.0]), np.array([0.0, 0.1, 0.1, 0.1, 0.7])],
    "final": [np.full(5, 0.2)],
}


def mixture_step(nets, candidates, samples=250, seed=0):
    z = torch.randn(samples, SPECS[0].latent_dim, generator=torch.Generator().manual_seed(seed))
    return MixtureStep([{"params": g.state_dict()} for g, _ in nets], z, candidates)


@pytest.mark.parametrize("name", CANDIDATES)
def test_each_candidate_is_scored_on_its_own_mixtures_images(name, scoring, one_thread):
    nets = pairs(SPECS[0], 5)
    engine = StackedEngine(nets[0][0].stacked(), nets[0][1].stacked(), whole=False)
    step = mixture_step(nets, CANDIDATES[name])
    shares = [np.cumsum([0, *proportional_counts(w, 250)]) for w in step.candidates]
    for k, (start, end) in enumerate(step.spans):
        assert start == min(b[k] for b in shares) and end == max(b[k + 1] for b in shares)
    (images,) = engine.span_images([SimpleNamespace(device=CPU)], [step])
    assert len(images) == sum(end - start for start, end in step.spans)
    scorer = FidScorer(*scoring, CPU)
    fids = candidate_fids(scorer, step, scorer.features(images).numpy())
    with torch.no_grad():
        for weights, rows, fid in zip(step.candidates, step.rows(), fids):
            mixture = MixtureGenerator([g for g, _ in nets], weights)(step.z)
            torch.testing.assert_close(images[rows], mixture, rtol=1e-5, atol=1e-6)
            assert fid == pytest.approx(scorer.fid(mixture), rel=1e-4)
    assert len(set(fids)) == len(fids)


@pytest.mark.parametrize("whole", [False, True], ids=["cache", "whole"])
def test_a_cells_span_images_do_not_depend_on_the_cells_beside_it(whole, one_thread):
    nets = pairs(SPECS[0], 5)
    engine = StackedEngine(nets[0][0].stacked(), nets[0][1].stacked(), whole)
    steps = [mixture_step(nets, CANDIDATES[name], seed=s) for s, name in enumerate(CANDIDATES)]
    cells = [SimpleNamespace(device=CPU)] * len(steps)
    alone = engine.span_images(cells[:1], steps[-1:])[0]
    together = engine.span_images(cells, steps)[-1]
    assert torch.equal(alone, together)


def grid_cells(
    loss: str, count: int = 4, network: str = "perceptron4", side: int = 8, population: int = 2, images: int = 100
) -> list:
    """``count`` cells of a 2x2 grid of ``network`` on ``images`` random images of ``side`` x ``side``, initialised."""
    from conftest import SCHEMA
    from ganstudy.config.setup_settings import TrainingSettings
    from ganstudy.config.validate import validate_study_config
    from ganstudy.parallel.topology import GridShape
    from ganstudy.train.grid.cell import CellStreams, GridCell
    from ganstudy.train.grid.pool import NetworkPool

    section = {
        "mode": "grid",
        "network": network,
        "hidden_units": 32,
        "latent_dim": 16,
        "batch_size": 20,
        "loss": loss,
        "grid": {"shape": "2x2", "population_size": population, "n_replacements": 1, "data_ratio": 1.0},
    }
    setup = TrainingSettings.of(job_settings(validate_study_config({"setups": {"g": section}}, SCHEMA)["setups"]["g"]))
    labels = np.arange(images) % 10
    images = torch.rand(images, 1, side, side, generator=torch.Generator().manual_seed(3)) * 2 - 1
    shape = GridShape(2, 2)
    spec = NetworkSpec((1, side, side), 16, 32)
    pool = NetworkPool(setup.network, spec, CPU)
    cells = [
        GridCell(c, shape, setup, spec, images, labels, None, CellStreams(5, 1, c, CPU), pool)
        for c in shape.cells()[:count]
    ]
    for cell in cells:
        cell.initialise()
    return cells


@pytest.mark.parametrize("whole", [False, True], ids=["cache", "whole"])
@pytest.mark.parametrize("loss", ["bce", "mustangs"])
def test_the_stacked_engine_trains_what_the_per_cell_loop_trains(loss, whole, one_thread):
    # The loop (nn.Modules, torch's fused Adam) is the reference: the same draws, the arithmetic of
    # another kernel (batched products, Adam in whole-stack operations), so alike within rounding.
    from conftest import assert_trained_alike
    from ganstudy.train.grid.iteration import LoopEngine

    cells = grid_cells(loss)
    selections = [(cell.generators, cell.discriminators) for cell in cells]
    net = build_pair("perceptron4", cells[0].spec)
    stacked = StackedEngine(net[0].stacked(), net[1].stacked(), whole).train(
        cells, copy.deepcopy(selections), 3, lambda: None
    )
    looped = LoopEngine(whole).train(cells, copy.deepcopy(selections), 3, lambda: None)
    for (g_a, d_a, g_loss_a, d_loss_a), (g_b, d_b, g_loss_b, d_loss_b) in zip(stacked, looped):
        assert g_loss_a == pytest.approx(g_loss_b, rel=1e-5) and d_loss_a == pytest.approx(d_loss_b, rel=1e-5)
        for a, b in zip(g_a + d_a, g_b + d_b):
            assert a["lr"] == b["lr"] and a["origin"] == b["origin"]
            assert_trained_alike(a["params"], b["params"])
            assert [float(s["step"]) for s in a["adam"]["state"].values()] == [
                float(s["step"]) for s in b["adam"]["state"].values()
            ]
    # Another iteration draws otherwise.
    again = StackedEngine(net[0].stacked(), net[1].stacked(), whole).train(
        cells, copy.deepcopy(selections), 4, lambda: None
    )
    assert not torch.equal(again[0][0][0]["params"]["net.0.weight"], stacked[0][0][0]["params"]["net.0.weight"])


def test_the_general_stacked_form_trains_what_the_per_cell_loop_trains(one_thread):
    # cnn28: transposed convolutions and batch norms in both networks, which normalise by each row's batch
    # and update the running statistics of attackers and defenders alike, as the loop's training mode does.
    from conftest import assert_trained_alike

    # One update of each player (20 images, a batch of 20). Adam's first steps are +-lr wherever a gradient
    # is rounding noise, and the loop's convolutions round otherwise than the grouped ones: after one update
    # 705 of 2.76 M elements are apart (AMD EPYC Zen 3, AVX2), and a second update of the generator, against
    # those discriminators, puts 58,581 apart there (2.1%; within 0.1% on a Zen 4 with AVX-512).
    cells = grid_cells("bce", network="cnn28", side=28, population=1, images=20)
    selections = [(cell.generators, cell.discriminators) for cell in cells]
    g, d = (StackedNetwork(net) for net in build_pair("cnn28", cells[0].spec))
    stacked = StackedEngine(g, d, whole=True).train(cells, copy.deepcopy(selections), 3, lambda: None)
    looped = LoopEngine(whole=True).train(cells, copy.deepcopy(selections), 3, lambda: None)
    for (g_a, d_a, g_loss_a, d_loss_a), (g_b, d_b, g_loss_b, d_loss_b), (g_start, d_start) in zip(
        stacked, looped, selections
    ):
        assert g_loss_a == pytest.approx(g_loss_b, rel=1e-5) and d_loss_a == pytest.approx(d_loss_b, rel=1e-5)
        for a, b, start in zip(g_a + d_a, g_b + d_b, g_start + d_start):
            assert a["lr"] == b["lr"] and a["origin"] == b["origin"]
            # The running statistics and each batch norm's count of batches included. A bias just before a
            # batch norm has a true gradient of zero, rounding noise, which Adam turns into steps of about
            # the learning rate either way: such biases (and the running means that carry them) may part.
            assert_trained_alike(a["params"], b["params"])
            statistics = [key for key in start["params"] if key.endswith("running_var")]
            assert statistics and not any(torch.equal(a["params"][key], start["params"][key]) for key in statistics)
            assert [float(s["step"]) for s in a["adam"]["state"].values()] == [
                float(s["step"]) for s in b["adam"]["state"].values()
            ]


def without_batch_norms(pair: tuple[nn.Module, nn.Module]) -> tuple[nn.Module, nn.Module]:
    for net in pair:
        for parent in list(net.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.modules.batchnorm._BatchNorm):
                    setattr(parent, name, nn.Identity())
    return pair


@pytest.mark.parametrize("population", [1, 2])
def test_the_general_stacked_form_drops_what_the_per_cell_loop_drops(population, monkeypatch, one_thread):
    # dcgan's discriminator drops units: each row's masks are keyed by its cell's update and attacker, as
    # the loop keys its lone networks', so both train alike; in populations of two as well, where the
    # attackers share a defender that drops by each attacker's key (dcgan without its batch norms, which
    # train stacked in populations of one only). Neither draws from the cell's global stream.
    import ganstudy.train.grid.pool as pool
    from conftest import assert_trained_alike

    pair = lambda spec: build_pair("dcgan", spec) if population == 1 else without_batch_norms(build_pair("dcgan", spec))  # noqa: E731
    monkeypatch.setattr(pool, "build_pair", lambda name, spec: pair(spec))
    cells, again, fresh = (grid_cells("bce", network="dcgan", population=population, images=40) for _ in range(3))
    selections = [(cell.generators, cell.discriminators) for cell in cells]
    g, d = (StackedNetwork(net) for net in pair(cells[0].spec))
    assert g.drops or d.drops
    assert not _why_not_trained_stacked((g, d), population)
    stacked = StackedEngine(g, d, whole=True).train(cells, copy.deepcopy(selections), 3, lambda: None)
    looped = LoopEngine(whole=True).train(again, copy.deepcopy(selections), 3, lambda: None)
    for (g_a, d_a, g_loss_a, d_loss_a), (g_b, d_b, g_loss_b, d_loss_b) in zip(stacked, looped):
        assert g_loss_a == pytest.approx(g_loss_b, rel=1e-5) and d_loss_a == pytest.approx(d_loss_b, rel=1e-5)
        for a, b in zip(g_a + d_a, g_b + d_b):
            assert_trained_alike(a["params"], b["params"])
    for cell, twin, untouched in zip(cells, again, fresh):
        assert torch.equal(cell.streams.dropout.state()["cpu"], untouched.streams.dropout.state()["cpu"])
        assert torch.equal(twin.streams.dropout.state()["cpu"], untouched.streams.dropout.state()["cpu"])


def test_the_evaluation_engine_scores_and_samples_what_the_per_cell_loop_does(one_thread):
    # dcgan: batch norm (running statistics in evaluation), dropout (off in evaluation), convolutions.
    cells = grid_cells("bce", network="dcgan")
    gathered = {cell.cell: cell.shared_state() for cell in cells}
    pools = [cell.neighbourhood_payloads(gathered) for cell in cells]
    reals, noises = GridDraws(cells, 1, whole=True).fitness_samples()
    cases = lambda: [FitnessCase(g, d, real, z) for (g, d), real, z in zip(pools, reals, noises)]  # noqa: E731
    g, d = build_pair("dcgan", cells[0].spec)
    stacked, looped = StackedEvaluationEngine(StackedNetwork(g), StackedNetwork(d), whole=True), LoopEngine(whole=True)
    for (g_stacked, d_stacked), (g_looped, d_looped) in zip(
        stacked.fitness(cells, cases()), looped.fitness(cells, cases())
    ):
        assert g_stacked.shape == g_looped.shape == (6, 6)  # 3 neighbours of 2 individuals each
        np.testing.assert_allclose(g_stacked, g_looped, rtol=1e-5)
        np.testing.assert_allclose(d_stacked, d_looped, rtol=1e-5)
    steps = [cell.mixture_step(gathered, z) for cell, z in zip(cells, GridDraws(cells, 1, whole=True).mixture_noise())]
    for a, b in zip(stacked.span_images(cells, steps), looped.span_images(cells, steps)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["generators", "discriminators"])
@pytest.mark.parametrize("population", [1, 2])
@pytest.mark.parametrize("loss", ["bce", "mustangs"])
def test_a_stacked_update_is_the_same_device_work_at_every_call_and_reads_nothing_back(kind, population, loss):
    """What a CUDA graph needs of the update it replays (CapturedUpdate): at every call the same operators
    on the same shapes, no value read back by the host, no tensor made from host values inside; here on
    the CPU, the dispatch counter's view of what a GPU would be asked."""
    spec, cells = SPECS[0], 3
    nets = pairs(spec, cells * population)
    g_net, d_net = nets[0][0].stacked(), nets[0][1].stacked()
    payloads = lambda k: [  # noqa: E731
        Individual(pair[k], torch.optim.Adam(pair[k].parameters()), 1e-3, 0.0, "x").payload() for pair in nets
    ]
    generators, discriminators = (
        StackedPlayers(net, payloads(k), (0.5, 0.999), CPU, False) for k, net in enumerate((g_net, d_net))
    )
    attackers, opponents = (generators, discriminators) if kind == "generators" else (discriminators, generators)
    images = torch.rand(40, *spec.image_shape) * 2 - 1 if kind == "discriminators" else None
    engine = StackedEngine(g_net, d_net, whole=True)
    candidates = tuple(LOSSES.get(name) for name in MUSTANGS_LOSSES) if loss == "mustangs" else (LOSSES.get(loss),)
    rows, batch = cells * population, 6
    traces, values = [], []
    for call in range(3):
        draw = torch.Generator().manual_seed(call)
        inputs = UpdateInputs(
            noise=torch.randn(rows, batch, spec.latent_dim, generator=draw),
            factors=attackers.next_factors(),
            defenders=None if population == 1 else torch.randint(rows, (rows,), generator=draw),
            choice=torch.randint(3, (rows,), generator=draw) if loss == "mustangs" else None,
            batch=torch.randint(40, (rows, batch), generator=draw) if images is not None else None,
        )
        counter, reads = OperatorCounter(trace=True), Counter()
        with counter, counting_host_reads(reads):
            values.append(engine._stacked_update(attackers, opponents, candidates, images, inputs))
        traces.append(counter.calls)
        assert not reads, f"call {call} read {dict(reads)} back to the host"
        assert "aten.lift_fresh" not in counter.operators, "a tensor made from host values inside the update"
    assert traces[0] == traces[1] == traces[2]
    assert values[0].shape == (rows,) and not torch.equal(values[1], values[2])
