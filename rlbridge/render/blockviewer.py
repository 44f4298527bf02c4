"""The built-in block viewer: setblock/fill lines over ZeroMQ drawn as blocks in 3D, no game server.

The view is what a player standing south of a board (boards are walls facing +z) sees:
the wall face-on, and each block's top and east side receding up and to the right, so
that block digits read as they would in the world.

Run it as its own process (``rlbridge blocks viewer --bind ADDR``): it binds a PULL socket,
applies each received batch of command lines (newline-separated) to a block world and
redraws. Two control lines are understood besides commands: ``#snapshot`` saves a PNG of
the current view to the viewer's own ``--snapshot`` path, and ``#quit`` stops the viewer.
No line names a file: anyone who reaches the socket may send lines. In a window, the s key
saves ``blocks_NNNN.png`` in the working directory.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zmq

from rlbridge.extras import require
from rlbridge.render.blocks import apply_commands
from rlbridge.render.palette import BACKGROUND, GRAPHICS_CONTRAST, block_rgb, contrast, lifted

if TYPE_CHECKING:  # pygame is the render extra's; it is imported where it draws
    from pygame import Surface

Position = tuple[int, int, int]
#: Brightness of each visible face: the top, the east (+x) side and the south (+z) front.
FACE_SHADE = {"top": 1.0, "east": 0.75, "south": 0.9}
#: Blocks drawn with a band across their front, in this colour, as in the game's texture.
BANDED = {"minecraft:tnt": (235, 235, 230)}
#: How far one block of depth (-z) recedes, up and to the right, in block edges on screen.
DEPTH = 0.35


def shade(rgb: tuple[int, int, int], face: str) -> tuple[int, int, int]:
    factor = FACE_SHADE[face]
    return (round(rgb[0] * factor), round(rgb[1] * factor), round(rgb[2] * factor))


def edge_rgb(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """The colour of a block's edges against air: its shaded side, or, for a block as dark as
    the background (black and gray wool), a light edge that shows its outline."""
    if contrast(rgb, BACKGROUND) < GRAPHICS_CONTRAST:
        return lifted(rgb, BACKGROUND)
    return shade(rgb, "east")


@dataclass(frozen=True)
class Projection:
    """Oblique projection: +x goes right, +y up, +z toward the viewer (down and to the left by
    ``DEPTH``); ``scale`` pixels per block edge."""

    scale: int
    offset_x: float
    offset_y: float

    def project(self, x: float, y: float, z: float) -> tuple[float, float]:
        return (
            self.offset_x + (x - DEPTH * z) * self.scale,
            self.offset_y + (DEPTH * z - y) * self.scale,
        )

    def face_centre(self, position: Position, face: str = "south") -> tuple[int, int]:
        x, y, z = position
        centre = {
            "top": (x + 0.5, y + 1, z + 0.5),
            "east": (x + 1, y + 0.5, z + 0.5),
            "south": (x + 0.5, y + 0.5, z + 1),
        }[face]
        px, py = self.project(*centre)
        return (int(round(px)), int(round(py)))


def face_polygons(position: Position) -> dict[str, list[tuple[int, int, int]]]:
    x, y, z = position
    return {
        "top": [(x, y + 1, z), (x + 1, y + 1, z), (x + 1, y + 1, z + 1), (x, y + 1, z + 1)],
        "east": [(x + 1, y, z), (x + 1, y + 1, z), (x + 1, y + 1, z + 1), (x + 1, y, z + 1)],
        "south": [(x, y, z + 1), (x + 1, y, z + 1), (x + 1, y + 1, z + 1), (x, y + 1, z + 1)],
    }


class BlockWorld:
    """Blocks by position; air is absence. ``apply`` takes 1.13+ command lines."""

    def __init__(self) -> None:
        self.blocks: dict[Position, str] = {}
        self.commands = 0

    def apply(self, lines: list[str]) -> None:
        apply_commands(self.blocks, lines)
        self.commands += len(lines)

    def bounds(self) -> tuple[Position, Position] | None:
        if not self.blocks:
            return None
        xs, ys, zs = zip(*self.blocks, strict=True)
        return (min(xs), min(ys), min(zs)), (max(xs) + 1, max(ys) + 1, max(zs) + 1)


def fit_projection(
    bounds: tuple[Position, Position], scale: int, margin: int
) -> tuple[Projection, tuple[int, int]]:
    """A projection that shows the box ``bounds`` whole, and the surface size it needs."""
    (x0, y0, z0), (x1, y1, z1) = bounds
    corners = [(x, y, z) for x in (x0, x1) for y in (y0, y1) for z in (z0, z1)]
    raw = Projection(scale, 0.0, 0.0)
    points = [raw.project(*c) for c in corners]
    min_u, max_u = min(p[0] for p in points), max(p[0] for p in points)
    min_v, max_v = min(p[1] for p in points), max(p[1] for p in points)
    projection = Projection(scale, margin - min_u, margin - min_v)
    size = (int(max_u - min_u) + 2 * margin + 1, int(max_v - min_v) + 2 * margin + 1)
    return projection, size


def draw_world(
    world: BlockWorld,
    scale: int = 16,
    margin: int = 12,
    bounds: tuple[Position, Position] | None = None,
):
    """(surface, projection) of the world drawn; far blocks first (north to south, then bottom
    to top and west to east, so that each block covers the faces it hides)."""
    pygame = require("pygame", "the block viewer")

    bounds = bounds or world.bounds() or ((0, 0, 0), (1, 1, 1))
    projection, size = fit_projection(bounds, scale, margin)
    surface = pygame.Surface(size)
    surface.fill(BACKGROUND)
    for position in sorted(world.blocks, key=lambda p: (p[2], p[1], p[0])):
        rgb = block_rgb(world.blocks[position])
        outline, inner = edge_rgb(rgb), shade(rgb, "east")
        for face, corners in face_polygons(position).items():
            points = [projection.project(*c) for c in corners]
            pygame.draw.polygon(surface, shade(rgb, face), points)
            if face != "south":
                pygame.draw.polygon(surface, outline, points, 1)
                continue
            if world.blocks[position] in BANDED:  # TNT's white band: not a red wool block
                x, y, z = position
                band = [
                    projection.project(*c)
                    for c in (
                        (x, y + 0.35, z + 1),
                        (x + 1, y + 0.35, z + 1),
                        (x + 1, y + 0.65, z + 1),
                        (x, y + 0.65, z + 1),
                    )
                ]
                pygame.draw.polygon(surface, BANDED[world.blocks[position]], band)
            # The front face's edges: light against air, so that a dark block's outline
            # shows; between blocks the shaded edge, so that block digits stay solid.
            x, y, z = position
            beside = (
                (x, y - 1, z),
                (x + 1, y, z),
                (x, y + 1, z),
                (x - 1, y, z),
            )  # below, right, above, left
            for index, neighbour in enumerate(beside):
                colour = inner if neighbour in world.blocks else outline
                pygame.draw.line(surface, colour, points[index], points[(index + 1) % 4])
    return surface, projection


class BlockViewer:
    """Receives command batches on a PULL socket and keeps a :class:`BlockWorld` drawn."""

    def __init__(
        self, address: str, headless: bool = True, scale: int = 16, snapshot_path: str | None = None
    ):
        from rlbridge.render.frame import init_headless

        if headless:
            init_headless()
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PULL)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(address)
        self.address: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.world = BlockWorld()
        self.scale = scale
        self.snapshot_path = snapshot_path  # where #snapshot saves: the user's, never a peer's
        self.headless = headless
        self.errors = 0
        self.last_error = ""
        self._window: Surface | None = None
        self.saved = 0
        self.stopping = False  # set by stop(), e.g. from a signal handler

    def handle(self, text: str) -> bool:
        """Apply one received batch; False once ``#quit`` arrived."""
        commands: list[str] = []
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                self._flush(commands)
                commands = []
                word, _, argument = line[1:].partition(" ")
                if word == "quit":
                    return False
                if word == "snapshot":
                    self._control_snapshot(argument.strip())
                continue
            commands.append(line)
        self._flush(commands)
        return True

    def _flush(self, commands: list[str]) -> None:
        try:
            self.world.apply(commands)
        except ValueError as exc:  # a bad line must not kill the viewer; apply what parses
            self.errors += 1
            self.last_error = str(exc)
            for line in commands:
                with contextlib.suppress(ValueError):
                    self.world.apply([line])

    def _control_snapshot(self, argument: str) -> None:
        """``#snapshot``: save to the viewer's own path; a path in the line is refused."""
        if argument or self.snapshot_path is None:
            self.errors += 1
            self.last_error = (
                f"#snapshot {argument}: the viewer saves only to its own "
                "--snapshot PNG path, never to one a line names"
                if argument
                else "#snapshot: this viewer has no --snapshot PNG path"
            )
            return
        self.snapshot(self.snapshot_path)

    def snapshot(self, path: str) -> None:
        pygame = require("pygame", "the block viewer")

        surface, _ = draw_world(self.world, self.scale)
        pygame.image.save(surface, path)

    def run(self, max_batches: int | None = None, idle_timeout_ms: int | None = None) -> int:
        """Serve until ``#quit``, ``max_batches`` batches, an idle timeout, or the window closes."""
        batches = 0
        while (max_batches is None or batches < max_batches) and not self.stopping:
            if not self._socket.poll(idle_timeout_ms if idle_timeout_ms is not None else 100):
                if idle_timeout_ms is not None:
                    break
                if self._pump_window():
                    break
                continue
            keep_going = self.handle(self._socket.recv_string())
            batches += 1
            if not keep_going or self._pump_window(redraw=True):
                break
        self.close()
        return batches

    def stop(self) -> None:
        """End :meth:`run` within one poll interval (safe to call from a signal handler)."""
        self.stopping = True

    def close(self) -> None:
        self._socket.close()

    def _pump_window(self, redraw: bool = False) -> bool:
        """Redraw the window if there is one; True when the user closed it."""
        if self.headless:
            return False
        pygame = require("pygame", "the block viewer")

        if self._window is None:
            pygame.display.init()
            pygame.display.set_caption(f"rlbridge blocks {self.address}")
            redraw = True
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                return True
            if event.type == pygame.KEYDOWN and event.key == pygame.K_s:
                self.saved += 1
                self.snapshot(f"blocks_{self.saved:04d}.png")  # in the working directory
        if redraw:
            surface, _ = draw_world(self.world, self.scale)
            if self._window is None or self._window.get_size() != surface.get_size():
                self._window = pygame.display.set_mode(surface.get_size())
            self._window.blit(surface, (0, 0))
            pygame.display.flip()
        return False
