"""Exact endgame play for the Minesweeper solver: when few mine layouts remain, search them all.

With the consistent layouts listed explicitly, the win probability of every guess is
computed by recursion: a guess is safe in some layouts and shows a hint that splits
them; cells safe in every remaining layout are opened for free. Flood openings are
ignored (they only add information), so the value is a lower bound for every choice.

The search has a work budget (layouts examined while splitting by hint, see
:data:`ENDGAME_WORK`); when it runs out the solver falls back to its ordinary guess, so a
move's cost stays bounded and the same position always gets the same move.
"""

from __future__ import annotations

from math import comb

#: Layouts examined (summed over every split) before an endgame search gives up.
ENDGAME_WORK = 8_000


def enumerate_layouts(
    hints: list[int], is_open: list[bool], neighbours, mines: int, known_mines: set[int], limit: int
) -> list[frozenset[int]] | None:
    """Every mine layout (as a set of cells, known mines included) consistent with the
    observation, or None if there are more than ``limit``."""
    cells = len(hints)
    unknown = [c for c in range(cells) if not is_open[c] and c not in known_mines]
    constraints: list[list[int]] = []  # [need, capacity] per open hint cell with unknowns
    touching: dict[int, list[int]] = {}
    for cell in range(cells):
        if not is_open[cell]:
            continue
        variables = [n for n in neighbours[cell] if not is_open[n] and n not in known_mines]
        if variables:
            need = hints[cell] - sum(1 for n in neighbours[cell] if n in known_mines)
            for n in variables:
                touching.setdefault(n, []).append(len(constraints))
            constraints.append([need, len(variables)])
    frontier = [c for c in unknown if c in touching]
    outside = [c for c in unknown if c not in touching]
    left = mines - len(known_mines)
    layouts: list[frozenset[int]] = []
    chosen: list[int] = []
    base = frozenset(known_mines)

    def place_outside(start: int, remaining: int) -> bool:
        if remaining == 0:
            layouts.append(base.union(chosen))
            return len(layouts) <= limit
        for index in range(start, len(outside) - remaining + 1):
            chosen.append(outside[index])
            ok = place_outside(index + 1, remaining - 1)
            chosen.pop()
            if not ok:
                return False
        return True

    def assign(depth: int, placed: int) -> bool:
        if depth == len(frontier):
            rest = left - placed
            if not 0 <= rest <= len(outside):
                return True
            if len(layouts) + comb(len(outside), rest) > limit:
                return False
            return place_outside(0, rest)
        cell = frontier[depth]
        for mine in (0, 1):
            if mine and placed >= left:
                break
            ok = True
            for c in touching[cell]:
                need, capacity = constraints[c]
                if need - mine < 0 or need - mine > capacity - 1:
                    ok = False
                    break
            if not ok:
                continue
            for c in touching[cell]:
                constraints[c][0] -= mine
                constraints[c][1] -= 1
            if mine:
                chosen.append(cell)
            keep_going = assign(depth + 1, placed + mine)
            if mine:
                chosen.pop()
            for c in touching[cell]:
                constraints[c][0] += mine
                constraints[c][1] += 1
            if not keep_going:
                return False
        return True

    if not assign(0, 0):
        return None
    return layouts


class EndgameSearch:
    """Win probabilities of guesses over an explicit list of layouts, memoised by subset."""

    def __init__(
        self,
        layouts: list[frozenset[int]],
        candidates: list[int],
        neighbours,
        work: int = ENDGAME_WORK,
    ):
        self.layouts = layouts
        self.candidates = candidates
        self.neighbours = neighbours
        self.memo: dict[frozenset[int], float] = {}
        self.budget = work

    def guess_values(self) -> dict[int, float] | None:
        """Each candidate's win probability with optimal play afterwards, or None if the
        search ran out of budget."""
        everyone = frozenset(range(len(self.layouts)))
        try:
            return {cell: self._guess_value(cell, everyone) for cell in self.candidates}
        except _OutOfBudget:
            return None

    def _split(self, cell: int, subset: frozenset[int]) -> list[frozenset[int]]:
        self.budget -= len(subset)
        if self.budget < 0:
            raise _OutOfBudget
        groups: dict[int, list[int]] = {}
        around = self.neighbours[cell]
        for index in subset:
            layout = self.layouts[index]
            if cell in layout:
                continue
            shown = sum(1 for n in around if n in layout)
            groups.setdefault(shown, []).append(index)
        return [frozenset(g) for g in groups.values()]

    def _guess_value(self, cell: int, subset: frozenset[int]) -> float:
        return sum(len(g) * self._value(g, cell) for g in self._split(cell, subset)) / len(subset)

    def _value(self, subset: frozenset[int], opened: int) -> float:
        """Win probability with optimal play from the layouts ``subset``."""
        if len(subset) == 1:
            return 1.0
        cached = self.memo.get(subset)
        if cached is not None:
            return cached
        layouts = [self.layouts[i] for i in subset]
        union = frozenset().union(*layouts)
        common = frozenset.intersection(*layouts)
        undecided = sorted(union - common)
        # A cell that is safe in every layout but whose hint differs is free information.
        for cell in self.candidates:
            if cell not in union and cell != opened:
                groups = self._split(cell, subset)
                if len(groups) > 1:
                    value = sum(len(g) * self._value(g, cell) for g in groups) / len(subset)
                    self.memo[subset] = value
                    return value
        best = max(self._guess_value(cell, subset) for cell in undecided)
        self.memo[subset] = best
        return best


class _OutOfBudget(Exception):
    pass
