"""Renderers (pygame canvases, block commands) and their sinks."""

import os

# pygame prints a banner to stdout when first imported; every import of it goes through here.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
