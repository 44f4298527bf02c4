"""Drawing: pygame canvases, block commands, viewers, the RCON client and sinks, screenshots.

Nothing here imports a game; each game's ``draw.py`` draws with it (docs/render.md)."""

import os

# pygame prints a banner to stdout when first imported; every import of it goes through here.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
