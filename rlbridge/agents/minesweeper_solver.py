"""An exact Minesweeper probability solver: frontier constraint satisfaction plus the global mine count.

Each decision uses only the observation (hints of open cells, the open mask) and the
mine count from the task spec. Unopened cells next to a hint form the frontier;
frontier cells touching the same hints are interchangeable and grouped into boxes;
boxes split into independent components; each component's solutions are enumerated
by backtracking over box mine counts and weighted by binomial coefficients, and the
components are combined with the cells off the frontier through C(outside, mines left).
"""

from __future__ import annotations

from math import comb

from .minesweeper_elimination import MinesweeperAgentBase, elimination_marks
from .minesweeper_endgame import EndgameSearch, enumerate_layouts


def _convolve(a: list[int], b: list[int]) -> list[int]:
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return out


class _Component:
    """Solutions of one independent group of boxes: weight and weighted box mine counts
    per total mine count ``t`` (exact integers)."""

    def __init__(self, boxes: list[list[int]], constraints: list[tuple[list[int], int]]):
        self.boxes = boxes
        sizes = [len(b) for b in boxes]
        limit = sum(sizes) + 1
        self.weights = [0] * limit
        self.box_mines = [[0] * limit for _ in boxes]
        box_constraints: list[list[int]] = [[] for _ in boxes]
        for index, (members, _) in enumerate(constraints):
            for b in members:
                box_constraints[b].append(index)
        need = [value for _, value in constraints]
        capacity = [sum(sizes[b] for b in members) for members, _ in constraints]
        order = self._order(len(boxes), box_constraints, constraints)
        counts = [0] * len(boxes)
        weights, box_mines = self.weights, self.box_mines

        def assign(depth: int, total: int, weight: int) -> None:
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

        assign(0, 0, 1)

    @staticmethod
    def _order(count: int, box_constraints, constraints) -> list[int]:
        """Breadth-first through shared constraints, so constraints close early and prune."""
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


_CACHE_LIMIT = 4096  # components kept by a solve cache before it starts afresh


def mine_probabilities(hints: list[int], is_open: list[bool], neighbours, mines: int,
                       known_mines: set[int] | frozenset = frozenset()) -> dict[int, float]:
    """The exact probability that each unopened cell holds a mine, given the observation,
    the total ``mines``, and cells already known to be mines. Unopened cells only."""
    return solve_board(hints, is_open, neighbours, mines, known_mines)[0]


def solve_board(hints: list[int], is_open: list[bool], neighbours, mines: int,
                known_mines: set[int] | frozenset = frozenset(),
                cache: dict | None = None) -> tuple[dict[int, float], int]:
    """Mine probabilities (as :func:`mine_probabilities`) and the number of mine layouts
    consistent with the observation (0 if none is). ``cache`` (a dict kept by the caller)
    reuses the enumeration of components seen before: a lookahead changes one or two
    components of the board and leaves the rest as they were."""
    cells = len(hints)
    unknown = [c for c in range(cells) if not is_open[c] and c not in known_mines]
    constraints: list[tuple[tuple[int, ...], int]] = []
    touching: dict[int, list[int]] = {}
    for cell in range(cells):
        if not is_open[cell]:
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
            for n in variables:
                touching.setdefault(n, []).append(len(constraints))
            constraints.append((tuple(variables), need))
    # Boxes: frontier cells touching exactly the same constraints.
    box_of_signature: dict[tuple[int, ...], int] = {}
    boxes: list[list[int]] = []
    for cell, signature in touching.items():
        key = tuple(signature)
        if key not in box_of_signature:
            box_of_signature[key] = len(boxes)
            boxes.append([])
        boxes[box_of_signature[key]].append(cell)
    # Components: union-find of boxes through shared constraints.
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
    components = []
    for group in groups.values():
        local = {b: i for i, b in enumerate(group)}
        wanted = {c for b in group for c in touching[boxes[b][0]]}
        local_constraints = [([local[b] for b in constraint_boxes[c]], constraints[c][1]) for c in sorted(wanted)]
        component_boxes = [boxes[b] for b in group]
        if cache is None:
            components.append(_Component(component_boxes, local_constraints))
            continue
        key = (tuple(map(tuple, component_boxes)),
               tuple((tuple(members), need) for members, need in local_constraints))
        component = cache.get(key)
        if component is None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            component = cache[key] = _Component(component_boxes, local_constraints)
        components.append(component)
    frontier = sum(len(b) for b in boxes)
    outside = len(unknown) - frontier
    left = mines - len(known_mines)
    every = [1]
    for component in components:
        every = _convolve(every, component.weights)

    def outside_ways(f: int) -> int:
        rest = left - f
        return comb(outside, rest) if 0 <= rest <= outside else 0

    total = sum(w * outside_ways(f) for f, w in enumerate(every) if w)
    probabilities: dict[int, float] = {c: 1.0 for c in known_mines if not is_open[c]}
    if total == 0:  # inconsistent input (e.g. a wrong mine count): fall back to flat odds
        for c in unknown:
            probabilities[c] = left / max(len(unknown), 1)
        return probabilities, 0
    for index, component in enumerate(components):
        others = [1]
        for j, other in enumerate(components):
            if j != index:
                others = _convolve(others, other.weights)
        factor = [sum(w * outside_ways(t + g) for g, w in enumerate(others) if w)
                  for t in range(len(component.weights))]
        for b, box in enumerate(component.boxes):
            expected = sum(m * f for m, f in zip(component.box_mines[b], factor, strict=True) if m)
            p = expected / (total * len(box))
            for c in box:
                probabilities[c] = p
    if outside:
        expected_outside = sum(w * outside_ways(f) * (left - f) for f, w in enumerate(every) if w)
        p_outside = expected_outside / (total * outside)
        for c in unknown:
            if c not in touching:
                probabilities[c] = p_outside
    return probabilities, total


class SolverAgent(MinesweeperAgentBase):
    """Opens a cell known to be safe when there is one; otherwise guesses by exact mine
    probabilities with a one-step lookahead, or by exhaustive search in the endgame.

    Cheap elimination runs first; the full probability computation only when it finds
    no safe cell. Cells proven safe or mined are remembered for the rest of the game.
    When at most ``endgame`` mine layouts remain, every guess's win probability is
    computed exactly over all of them (:mod:`.minesweeper_endgame`). Otherwise a guess
    considers the ``lookahead`` safest cells (probability within ``spread``, relative, of
    the lowest; cells likely to show a 0, such as corners, first among equals). For
    each, every hint it could show is solved exactly to get the chance ``progress``
    that it is safe *and* proves some other cell safe; with ``rule=progress`` the
    guess maximises ``(1 - p) * (1 - p_low) + progress * p_low`` (a guess without
    progress is charged the risk of another guess); with ``rule=survival`` the chance
    of surviving it and the safest next move. ``lookahead=0`` picks the lowest
    probability. Options: ``lookahead`` (6), ``spread`` (0.3), ``endgame`` (40),
    ``rule`` (progress), plus those of :class:`MinesweeperAgentBase`.
    """

    name = "minesweeper-solver"

    def __init__(self, lookahead: str = "6", spread: str = "0.3", endgame: str = "40", **options: str):
        self.lookahead = int(lookahead)
        self.spread = float(spread)
        self.endgame = int(endgame)
        self.rule = options.pop("rule", "progress")
        if self.rule not in ("progress", "survival"):
            raise ValueError(f"option rule must be progress or survival; got {self.rule!r}")
        super().__init__(**options)

    def settings(self) -> dict:
        return {"lookahead": self.lookahead, "spread": self.spread, "endgame": self.endgame,
                "rule": self.rule}

    def apply_settings(self, settings: dict) -> None:
        self.lookahead = int(settings.get("lookahead", self.lookahead))
        self.spread = float(settings.get("spread", self.spread))
        self.endgame = int(settings.get("endgame", self.endgame))
        self.rule = str(settings.get("rule", self.rule))

    def new_game(self) -> None:
        self.safe: set[int] = set()
        self.known_mines: set[int] = set()
        self.last_probabilities: dict[int, float] = {}
        self.last_total = 0
        self.cache: dict = {}

    def choose(self, hints: list[int], is_open: list[bool]) -> int:
        self.last_probabilities = {}
        self.safe = {c for c in self.safe if not is_open[c]}
        if not self.safe:
            seed_marks = {c: 1 for c in self.known_mines}
            marks = elimination_marks(hints, is_open, self.neighbours, seed_marks)
            for cell, mark in marks.items():
                (self.safe if mark == -1 else self.known_mines).add(cell)
        if self.safe:
            return min(self.safe)
        probabilities, total = solve_board(hints, is_open, self.neighbours, self.num_mines,
                                           self.known_mines, self.cache)
        self.last_probabilities, self.last_total = probabilities, total
        for cell, p in probabilities.items():
            if p <= 1e-12:
                self.safe.add(cell)
            elif p >= 1 - 1e-12:
                self.known_mines.add(cell)
        if self.safe:
            return min(self.safe)
        return self._guess(probabilities, total, hints, is_open)

    def _zero_chance(self, cell: int, p: float, probabilities: dict[int, float], is_open: list[bool]) -> float:
        """Chance that the cell is safe and shows a 0 (neighbours taken as independent)."""
        zero = 1.0 - p
        for n in self.neighbours[cell]:
            if not is_open[n]:
                zero *= 1.0 - probabilities.get(n, 0.0)
        return zero

    def _guess(self, probabilities: dict[int, float], total: int, hints: list[int], is_open: list[bool]) -> int:
        live = {c: p for c, p in probabilities.items() if c not in self.known_mines}
        lowest = min(live.values())
        if 0 < total <= self.endgame:
            layouts = enumerate_layouts(hints, is_open, self.neighbours, self.num_mines,
                                        self.known_mines, self.endgame)
            values = EndgameSearch(layouts, sorted(live), self.neighbours).guess_values() if layouts else None
            if values:
                return max(values, key=lambda c: (round(values[c], 12), -live[c], -c))
        window = lowest * (1.0 + self.spread) + 1e-12
        ranked = sorted(
            (c for c, p in live.items() if p <= window),
            key=lambda c: (live[c] > lowest + 1e-12, -self._zero_chance(c, live[c], probabilities, is_open), c),
        )
        # Half the places go to the safest cells, the rest to the best of the window, so
        # that many equally safe cells (off the frontier) do not crowd out the others.
        size = max(self.lookahead, 1)
        tied = [c for c in ranked if live[c] <= lowest + 1e-12]
        candidates = tied[: max(size // 2, 1)]
        candidates += sorted((c for c in ranked if c not in candidates), key=lambda c: live[c])[: size - len(candidates)]
        if len(candidates) == 1 or total == 0:
            return candidates[0]
        best, best_value = candidates[0], -1.0
        for cell in candidates:
            progress, survival = self._progress(cell, total, hints, is_open)
            if self.rule == "survival":
                value = survival
            else:
                value = (1.0 - live[cell]) * (1.0 - lowest) + progress * lowest
            if value > best_value + 1e-12:
                best, best_value = cell, value
        return best

    def _progress(self, cell: int, total: int, hints: list[int], is_open: list[bool]) -> tuple[float, float]:
        """P(cell is safe and the hint it shows proves some other cell safe), and P(cell is
        safe and so is the safest cell after its hint)."""
        known = sum(1 for n in self.neighbours[cell] if n in self.known_mines)
        closed = sum(1 for n in self.neighbours[cell] if not is_open[n] and n not in self.known_mines)
        opened = list(is_open)
        opened[cell] = True
        shown = list(hints)
        progress = 0
        survival = 0.0
        for value in range(known, known + closed + 1):
            shown[cell] = value
            after, ways = solve_board(shown, opened, self.neighbours, self.num_mines,
                                      self.known_mines, self.cache)
            if not ways:
                continue
            risk = min(after.values(), default=0.0)
            if risk <= 1e-12:
                progress += ways
            survival += ways * (1.0 - risk)
        return progress / total, survival / total

