"""The toroidal grid: shape, von Neumann neighbourhoods with wrap-around, and cells-to-ranks layout.

Cells are (row, col). A neighbourhood is the cell itself, then W, N, E, S, each once: on grids
with a side of 1 or 2 a neighbour can repeat (in a 2x2 grid W and E are the same cell), and
Lipizzaner would then train against the same individual twice as often.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ganstudy.errors import GanstudyError

Cell = tuple[int, int]


@dataclass(frozen=True)
class GridShape:
    rows: int
    cols: int

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}"

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
        around = [
            (row, col),
            (row, (col - 1) % self.cols),  # W
            ((row - 1) % self.rows, col),  # N
            (row, (col + 1) % self.cols),  # E
            ((row + 1) % self.rows, col),  # S
        ]
        return list(dict.fromkeys(around))


_SHAPE = re.compile(r"^(\d+)x(\d+)$")


def parse_shape(spec: str) -> GridShape:
    """A fixed grid shape "RxC" (the config's grid.shape other than "auto")."""
    match = _SHAPE.match(spec)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise GanstudyError(f"grid shape '{spec}' is neither 'auto' nor ROWSxCOLS such as '3x3'")
    return GridShape(int(match.group(1)), int(match.group(2)))


def resolve_shape(spec: str, ranks: int, min_cells: int, max_cells: int) -> GridShape:
    """A fixed "RxC" shape, or "auto": the rectangle that the available ranks fill (thesis Alg. 2).

    auto: n = min(ranks, max_cells), w = round(sqrt(n)) columns, h = n // w rows.
    """
    if spec == "auto":
        n = min(ranks, max_cells)
        cols = max(1, round(math.sqrt(n)))
        shape = GridShape(max(1, n // cols), cols)
    else:
        shape = parse_shape(spec)
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
