"""The grid's cells and their neighbourhoods, and the cells-to-ranks layout.

Cells are (row, col). Two topologies:

- torus (Lipizzaner's, seeds 000 and 002): von Neumann neighbourhoods with wrap-around, the cell itself,
  then W, N, E, S, each once: on grids with a side of 1 or 2 a neighbour can repeat (in a 2x2 grid W and E
  are the same cell), and Lipizzaner would then train against the same individual twice as often;
- ring (Lipi-Ring: Toutouh and O'Reilly, "Signal Propagation in a Gradient-Based and Evolutionary Learning
  System"): the cells in one row, closed into a ring, each with the ``radius`` cells on either side: itself,
  then W1, E1, W2, E2, ... A ring of radius 1 is the torus of one row, cell for cell.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ganstudy.errors import GanstudyError

Cell = tuple[int, int]
TOPOLOGIES = ("torus", "ring")


@dataclass(frozen=True)
class GridShape:
    rows: int
    cols: int
    topology: str = "torus"
    radius: int = 1  # a ring's: the cells on either side of a cell in its neighbourhood

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}"

    def describe(self) -> str:
        """The shape with its topology, for the run's record and its log: "3x3 torus", "ring of 9, radius 2"."""
        return f"{self} torus" if self.topology == "torus" else f"ring of {self.size}, radius {self.radius}"

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def cells(self) -> list[Cell]:
        """Row-major order: the order of ranks on the Cartesian communicator."""
        return [(r, c) for r in range(self.rows) for c in range(self.cols)]

    def index(self, cell: Cell) -> int:
        return cell[0] * self.cols + cell[1]

    def neighbourhood(self, cell: Cell) -> list[Cell]:
        row, col = cell
        if self.topology == "ring":
            sides = [(row, (col + step) % self.cols) for reach in range(1, self.radius + 1) for step in (-reach, reach)]
            return list(dict.fromkeys([cell, *sides]))
        around = [
            (row, col),
            (row, (col - 1) % self.cols),  # W
            ((row - 1) % self.rows, col),  # N
            (row, (col + 1) % self.cols),  # E
            ((row + 1) % self.rows, col),  # S
        ]
        return list(dict.fromkeys(around))


_SHAPE = re.compile(r"^(\d+)x(\d+)$")


def parse_shape(spec: str, topology: str = "torus", radius: int = 1) -> GridShape:
    """A fixed grid shape "RxC" (the config's grid.shape other than "auto") of ``topology``."""
    match = _SHAPE.match(spec)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise GanstudyError(f"grid shape '{spec}' is neither 'auto' nor ROWSxCOLS such as '3x3'")
    return _checked(GridShape(int(match.group(1)), int(match.group(2)), topology, radius))


def _checked(shape: GridShape) -> GridShape:
    """``shape`` where its topology can lay its cells out; an error naming the key otherwise."""
    if shape.topology not in TOPOLOGIES:
        raise GanstudyError(f"grid.topology '{shape.topology}' is not one of {', '.join(TOPOLOGIES)}")
    if shape.topology == "ring" and shape.rows != 1:
        raise GanstudyError(
            f"grid.shape {shape} for a ring: a ring's cells lie in one row, write grid.shape 1x{shape.size}"
        )
    if shape.topology == "ring" and 2 * shape.radius + 1 > shape.size:
        fix = (
            f"set grid.ring_radius to at most {(shape.size - 1) // 2} or give the ring more cells"
            if shape.size >= 3
            else "give the ring at least 3 cells"
        )
        raise GanstudyError(
            f"grid.ring_radius {shape.radius} on a ring of {shape.size} cells: a neighbourhood of radius "
            f"{shape.radius} needs {2 * shape.radius + 1} cells (itself and {shape.radius} on either side); {fix}"
        )
    return shape


def resolve_shape(
    spec: str, ranks: int, min_cells: int, max_cells: int, topology: str = "torus", radius: int = 1
) -> GridShape:
    """A fixed "RxC" shape, or "auto": the rectangle that the available ranks fill (thesis Alg. 2), for a
    ring the row of them.

    auto: n = min(ranks, max_cells), w = round(sqrt(n)) columns, h = n // w rows (a ring: 1 x n).
    """
    if spec == "auto":
        n = min(ranks, max_cells)
        cols = n if topology == "ring" else max(1, round(math.sqrt(n)))
        shape = _checked(GridShape(max(1, n // cols), cols, topology, radius))
    else:
        shape = parse_shape(spec, topology, radius)
    if shape.size < min_cells:
        raise GanstudyError(
            f"the grid has {shape.size} cells ({shape}), fewer than grid.min_cells={min_cells}"
            + (f": {ranks} MPI ranks are too few; launch at least {min_cells} ranks" if spec == "auto" else "")
        )
    if shape.size > max_cells:
        raise GanstudyError(f"the grid {shape} has {shape.size} cells, more than grid.max_cells={max_cells}")
    return shape


def assign_cells(shape: GridShape, ranks: int) -> list[list[Cell]]:
    """Contiguous row-major blocks as even as possible; ranks beyond the cell count get none."""
    cells = shape.cells()
    active = min(ranks, len(cells))
    blocks = [cells[r * len(cells) // active : (r + 1) * len(cells) // active] for r in range(active)]
    return blocks + [[] for _ in range(ranks - active)]
