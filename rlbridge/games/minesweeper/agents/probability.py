"""Exact Minesweeper mine probabilities: frontier constraint satisfaction plus the global mine
count.

Unopened cells next to a hint form the frontier; frontier cells touching the same hints
are interchangeable and grouped into boxes; boxes split into independent components;
each component's solutions are enumerated by backtracking over box mine counts and
weighted by binomial coefficients, and the components are combined with the cells off
the frontier through C(outside, mines left). All counts are exact Python integers.

A board is first reduced to its constraints (:func:`board_constraints`); the solver's
lookahead derives a hypothetical position's constraints from them in time proportional
to the frontier (:func:`reveal`) instead of re-reading the whole board.

Enumeration has a size budget (``node_limit`` backtracking nodes per component). A
component that exceeds it is solved approximately: it is split into two halves along its
breadth-first order, the constraints spanning both halves are dropped, and each half is
enumerated exactly (recursively, with the same limit). The result is the exact
distribution of a relaxed problem (fewer constraints), so probabilities stay consistent
with every kept hint; ``Solution.exact`` says whether any relaxation happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import comb

#: Backtracking nodes one component may use before it is relaxed (see the module docstring).
NODE_LIMIT = 3_000
_CACHE_LIMIT = 2048  # components kept by a solve cache before it starts afresh

Constraint = tuple[tuple[int, ...], int]  # (unknown cells around an open hint, mines among them)


def _convolve(a, b) -> list[int]:
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                if y:
                    out[i + j] += x * y
    return out


@lru_cache(maxsize=1024)
def _outside_ways(outside: int, left: int) -> tuple[int, ...]:
    """``C(outside, left - f)`` for ``f`` = 0 .. left: ways to place the mines not on the
    frontier."""
    return tuple(comb(outside, left - f) if left - f <= outside else 0 for f in range(left + 1))


class OverBudget(Exception):
    """A component needed more than ``node_limit`` nodes and relaxing was not allowed."""


class _Component:
    """Solutions of one independent group of boxes: weight and weighted box mine counts
    per total mine count ``t`` (exact integers). ``nodes`` is the backtracking work."""

    def __init__(
        self,
        boxes: list[list[int]],
        constraints: list[tuple[list[int], int]],
        node_limit: int = NODE_LIMIT,
        relax: bool = True,
    ):
        self.boxes = boxes
        self.exact = True
        self.nodes = 0
        # Lists while solving, tuples once frozen (_freeze).
        self.weights: Sequence[int] = []
        self.box_mines: Sequence[Sequence[int]] = []
        order = _order(len(boxes), constraints)
        try:
            self._enumerate(boxes, constraints, order, node_limit)
        except OverBudget:
            if not relax:
                raise
            if len(boxes) < 2:  # one box is never costly (size + 2 nodes): no need to relax
                self._enumerate(boxes, constraints, order, node_limit=len(boxes[0]) + 2)
            else:
                self._relax(boxes, constraints, order, node_limit)

    def _enumerate(self, boxes, constraints, order, node_limit) -> None:
        sizes = [len(b) for b in boxes]
        limit = sum(sizes) + 1
        self.weights = weights = [0] * limit
        self.box_mines = box_mines = [[0] * limit for _ in boxes]
        box_constraints: list[list[int]] = [[] for _ in boxes]
        for index, (members, _) in enumerate(constraints):
            for b in members:
                box_constraints[b].append(index)
        need = [value for _, value in constraints]
        capacity = [sum(sizes[b] for b in members) for members, _ in constraints]
        counts = [0] * len(boxes)
        budget = [node_limit]

        def assign(depth: int, total: int, weight: int) -> None:
            budget[0] -= 1
            if budget[0] < 0:
                raise OverBudget
            if depth == len(order):
                weights[total] += weight
                for b, k in enumerate(counts):
                    if k:
                        box_mines[b][total] += weight * k
                return
            b = order[depth]
            size = sizes[b]
            low, high = 0, size
            for c in box_constraints[b]:
                low = max(low, need[c] - (capacity[c] - size))
                high = min(high, need[c])
            if low > high:
                return
            for c in box_constraints[b]:
                capacity[c] -= size
            for k in range(low, high + 1):
                for c in box_constraints[b]:
                    need[c] -= k
                counts[b] = k
                assign(depth + 1, total + k, weight * comb(size, k))
                for c in box_constraints[b]:
                    need[c] += k
            counts[b] = 0
            for c in box_constraints[b]:
                capacity[c] += size

        try:
            assign(0, 0, 1)
        finally:
            self.nodes += node_limit - max(budget[0], 0)
        self._freeze()

    def _freeze(self) -> None:
        # Tuples of ints are untracked by the garbage collector, so a full cache does not
        # lengthen collections (which otherwise showed up as the slowest moves).
        self.weights = tuple(self.weights)
        self.box_mines = [tuple(m) for m in self.box_mines]

    def _relax(self, boxes, constraints, order, node_limit) -> None:
        """Split along ``order``, drop the constraints that span both halves, solve each."""
        self.exact = False
        half = set(order[: len(order) // 2])
        parts = []
        for side in (half, set(order) - half):
            local = {b: i for i, b in enumerate(sorted(side))}
            kept = [
                ([local[b] for b in members], value)
                for members, value in constraints
                if all(b in side for b in members)
            ]
            part = _Component([boxes[b] for b in sorted(side)], kept, node_limit)
            self.nodes += part.nodes
            parts.append((sorted(side), part))
        (_, a), (_, b) = parts
        self.weights = _convolve(a.weights, b.weights)
        box_mines: list[Sequence[int]] = [[0] * len(self.weights) for _ in boxes]
        for (members, part), other in ((parts[0], b), (parts[1], a)):
            for i, box in enumerate(members):
                box_mines[box] = _convolve(part.box_mines[i], other.weights)
        self.box_mines = box_mines
        self._freeze()


def _order(count: int, constraints) -> list[int]:
    """Breadth-first through shared constraints, so constraints close early and prune."""
    box_constraints: list[list[int]] = [[] for _ in range(count)]
    for index, (members, _) in enumerate(constraints):
        for b in members:
            box_constraints[b].append(index)
    order: list[int] = []
    seen = [False] * count
    for start in range(count):
        if seen[start]:
            continue
        seen[start] = True
        queue = [start]
        while queue:
            b = queue.pop(0)
            order.append(b)
            for c in box_constraints[b]:
                for other in constraints[c][0]:
                    if not seen[other]:
                        seen[other] = True
                        queue.append(other)
    return order


@dataclass
class Solution:
    """Mine probabilities per box (frontier) and for the cells off the frontier."""

    boxes: list[tuple[list[int], float]]
    unknown: list[int]  # every unknown cell; those in no box are off the frontier
    outside: int  # how many cells are off the frontier
    p_outside: float
    total: int  # consistent layouts (0 if none: then probabilities are flat)
    work: int  # backtracking nodes spent (cached components cost nothing)
    exact: bool

    def probabilities(self) -> dict[int, float]:
        out = dict.fromkeys(self.unknown, self.p_outside)
        for cells, p in self.boxes:
            for c in cells:
                out[c] = p
        return out

    def lowest(self) -> float:
        low = min((p for _, p in self.boxes), default=1.0)
        return min(low, self.p_outside) if self.outside else low


def board_constraints(
    hints: list[int],
    is_open: list[bool],
    neighbours,
    known_mines: set[int] | frozenset = frozenset(),
) -> tuple[list[Constraint], list[int]]:
    """The hints' constraints on unknown cells, and the unknown cells (unopened, not known
    mines)."""
    constraints: list[Constraint] = []
    for cell, opened in enumerate(is_open):
        if not opened:
            continue
        variables = []
        need = hints[cell]
        for n in neighbours[cell]:
            if not is_open[n]:
                if n in known_mines:
                    need -= 1
                else:
                    variables.append(n)
        if variables:
            constraints.append((tuple(variables), need))
    unknown = [c for c, opened in enumerate(is_open) if not opened and c not in known_mines]
    return constraints, unknown


def reveal(
    constraints: list[Constraint], cell: int, around: tuple[int, ...], need: int
) -> list[Constraint]:
    """The constraints after ``cell`` opens safe showing ``need`` mines among its unknown
    neighbours ``around`` (known mines already subtracted)."""
    out = []
    for variables, value in constraints:
        if cell in variables:
            variables = tuple(v for v in variables if v != cell)
            if not variables:
                continue
        out.append((variables, value))
    if around:
        out.append((around, need))
    return out


def solve_constraints(
    constraints: list[Constraint],
    unknown: list[int],
    left: int,
    cache: dict | None = None,
    node_limit: int = NODE_LIMIT,
    relax: bool = True,
) -> Solution:
    """Probabilities given constraints over ``unknown`` cells holding ``left`` mines.

    ``work`` in the result counts backtracking nodes plus constraints and frontier cells
    handled, a deterministic proxy for the time spent. With ``relax=False`` a component
    over ``node_limit`` raises :class:`OverBudget` instead of being relaxed."""
    touching: dict[int, list[int]] = {}
    for index, (variables, _) in enumerate(constraints):
        for n in variables:
            touching.setdefault(n, []).append(index)
    box_of_signature: dict[tuple[int, ...], int] = {}
    boxes: list[list[int]] = []
    for cell, signature in touching.items():
        key = tuple(signature)
        if key not in box_of_signature:
            box_of_signature[key] = len(boxes)
            boxes.append([])
        boxes[box_of_signature[key]].append(cell)
    parent = list(range(len(boxes)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    constraint_boxes: list[list[int]] = [[] for _ in constraints]
    for key, b in box_of_signature.items():
        for c in key:
            constraint_boxes[c].append(b)
    for members in constraint_boxes:
        for b in members[1:]:
            parent[find(b)] = find(members[0])
    groups: dict[int, list[int]] = {}
    for b in range(len(boxes)):
        groups.setdefault(find(b), []).append(b)
    components: list[_Component] = []
    work = 0
    for group in groups.values():
        local = {b: i for i, b in enumerate(group)}
        wanted = sorted({c for b in group for c in touching[boxes[b][0]]})
        local_constraints = [
            ([local[b] for b in constraint_boxes[c]], constraints[c][1]) for c in wanted
        ]
        component_boxes = [boxes[b] for b in group]
        cache_key = None
        if cache is not None:
            # The hints fix the boxes and solutions.
            cache_key = tuple(constraints[c] for c in wanted)
            component = cache.get(cache_key)
            if component is not None:
                components.append(component)
                continue
        component = _Component(component_boxes, local_constraints, node_limit, relax)
        work += component.nodes
        if cache is not None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[cache_key] = component
        components.append(component)
    frontier = len(touching)
    work += len(constraints) + frontier
    outside = len(unknown) - frontier
    exact = all(c.exact for c in components)
    # Prefix products of the components' weights, then a walk back from the last one:
    # ``tail[s]`` sums, over the mines g held by the components after the current one,
    # their weight times ways[s + g]; a component's factor is its prefix correlated with
    # that tail. Linear in the number of components (no "all the others" products).
    prefix = [[1]]
    for component in components:
        prefix.append(_convolve(prefix[-1], component.weights))
    every = prefix[-1]
    ways = list(_outside_ways(outside, left)[: frontier + 1]) if left >= 0 else []
    ways += [0] * (frontier + 1 - len(ways))
    total = sum(w * ways[f] for f, w in enumerate(every) if w)
    if total == 0:  # inconsistent input (e.g. a wrong mine count): fall back to flat odds
        flat = left / max(len(unknown), 1)
        return Solution([(box, flat) for box in boxes], unknown, outside, flat, 0, work, exact)
    tail = ways
    box_probabilities: list[tuple[list[int], float]] = []
    for index in range(len(components) - 1, -1, -1):
        component = components[index]
        weights = component.weights
        head = [(a, h) for a, h in enumerate(prefix[index]) if h]
        work += len(head) * len(weights) // 2
        factor = [sum(h * tail[t + a] for a, h in head) for t in range(len(weights))]
        for b, box in enumerate(component.boxes):
            expected = sum(m * f for m, f in zip(component.box_mines[b], factor, strict=True) if m)
            box_probabilities.append((box, expected / (total * len(box))))
        nonzero = [(j, w) for j, w in enumerate(weights) if w]
        tail = [sum(w * tail[s + j] for j, w in nonzero) for s in range(len(prefix[index]))]
    p_outside = 0.0
    if outside:
        expected_outside = sum(w * ways[f] * (left - f) for f, w in enumerate(every) if w)
        p_outside = expected_outside / (total * outside)
    return Solution(box_probabilities, unknown, outside, p_outside, total, work, exact)


def solve_board(
    hints: list[int],
    is_open: list[bool],
    neighbours,
    mines: int,
    known_mines: set[int] | frozenset = frozenset(),
    cache: dict | None = None,
) -> tuple[dict[int, float], int]:
    """Mine probabilities of the unopened cells (1 for known mines) and the number of mine
    layouts consistent with the observation (0 if none is). ``cache`` (a dict kept by the
    caller) reuses the enumeration of components seen before."""
    constraints, unknown = board_constraints(hints, is_open, neighbours, known_mines)
    solution = solve_constraints(constraints, unknown, mines - len(known_mines), cache)
    probabilities = {c: 1.0 for c in known_mines if not is_open[c]}
    probabilities.update(solution.probabilities())
    return probabilities, solution.total


def mine_probabilities(
    hints: list[int],
    is_open: list[bool],
    neighbours,
    mines: int,
    known_mines: set[int] | frozenset = frozenset(),
) -> dict[int, float]:
    """The exact probability that each unopened cell holds a mine, given the observation,
    the total ``mines``, and cells already known to be mines. Unopened cells only."""
    return solve_board(hints, is_open, neighbours, mines, known_mines)[0]
