"""Plain-text pictures of game snapshots, for typed play (``rlbridge play --text``) and logs."""

from __future__ import annotations


def _grid(rows: int, cols: int, cell) -> str:
    header = "   " + " ".join(f"{c:>2}" for c in range(cols))
    lines = [header] + [f"{r:>2} " + " ".join(f"{cell(r, c):>2}" for c in range(cols))
                        for r in range(rows)]
    return "\n".join(lines)


def describe(snapshot: dict) -> str:
    game = snapshot["game"]
    if game == "minesweeper":
        cols = snapshot["cols"]

        def mine_cell(r: int, c: int) -> str:
            i = r * cols + c
            if snapshot["mines"][i] and (snapshot["open"][i] or snapshot.get("lost")):
                return "*"
            return str(snapshot["hints"][i]) if snapshot["open"][i] else "#"

        return _grid(snapshot["rows"], cols, mine_cell)
    if game == "reversi":
        size = snapshot["size"]
        legal = set(snapshot.get("legal") or ())
        marks = {1: "X", -1: "O"}

        def stone(r: int, c: int) -> str:
            i = r * size + c
            return marks.get(snapshot["board"][i], "." if i in legal else "-")

        return _grid(size, size, stone)
    if game == "tetris":
        cols = snapshot["cols"]
        board = list(snapshot["board"])
        piece = snapshot.get("piece")
        for r, c in (piece or {}).get("cells", ()):
            if 0 <= r < snapshot["rows"] and 0 <= c < cols:
                board[r * cols + c] = piece["kind"]
        return _grid(snapshot["rows"], cols, lambda r, c: str(board[r * cols + c] or "."))
    if game == "2048":
        return "\n".join(" ".join(f"{v or '.':>6}" for v in snapshot["board"][r * 4:r * 4 + 4])
                         for r in range(4)) + f"\nscore {snapshot.get('score', 0)}"
    if game == "blackjack":
        dealer = snapshot["dealer"] if snapshot.get("done") else snapshot["dealer"][:1] + ["?"]
        return f"dealer: {' '.join(map(str, dealer))}\nplayer: {' '.join(map(str, snapshot['player']))}"
    raise ValueError(f"no text picture for game {game!r}")
