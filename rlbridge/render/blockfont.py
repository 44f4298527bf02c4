"""A 3x5 block font: digits and the few letters the block views spell, as cells to fill.

Minecraft shows a board as blocks, with no text; someone standing in the world reads a
number when it is written in blocks. Each glyph is 3 blocks wide and 5 tall, with one
block between glyphs.
"""

from __future__ import annotations

from collections.abc import Iterator

Cell = tuple[int, int]  # (row, col), as in a game's BlockGrid

GLYPH_WIDTH, GLYPH_HEIGHT, GLYPH_GAP = 3, 5, 1

GLYPHS: dict[str, tuple[str, ...]] = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", ".##", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", ".#.", ".#.", ".#."),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
    "A": (".#.", "#.#", "###", "#.#", "#.#"),
    "D": ("##.", "#.#", "#.#", "#.#", "##."),
    "P": ("##.", "#.#", "##.", "#..", "#.."),
}


def text_width(text: str) -> int:
    """Blocks across ``text`` written with :func:`glyph_cells`."""
    return len(text) * (GLYPH_WIDTH + GLYPH_GAP) - GLYPH_GAP if text else 0


def glyph_cells(text: str, top: int, left: int) -> Iterator[Cell]:
    """The (row, col) cells to fill to write ``text`` with its top-left corner at (top, left)."""
    for index, char in enumerate(text):
        try:
            glyph = GLYPHS[char]
        except KeyError:
            raise ValueError(f"the block font has no {char!r}; it has {''.join(GLYPHS)}") from None
        x0 = left + index * (GLYPH_WIDTH + GLYPH_GAP)
        for row, line in enumerate(glyph):
            for col, mark in enumerate(line):
                if mark == "#":
                    yield (top + row, x0 + col)


def read_text(filled: set[Cell], top: int, left: int, length: int) -> str:
    """The text of ``length`` glyphs at (top, left) among ``filled`` cells: the inverse of
    :func:`glyph_cells`, for tests and tools that read a block picture back."""
    shapes = {glyph: char for char, glyph in GLYPHS.items()}
    out = []
    for index in range(length):
        x0 = left + index * (GLYPH_WIDTH + GLYPH_GAP)
        glyph = tuple(
            "".join("#" if (top + r, x0 + c) in filled else "." for c in range(GLYPH_WIDTH))
            for r in range(GLYPH_HEIGHT)
        )
        out.append(shapes.get(glyph, "?"))
    return "".join(out)
