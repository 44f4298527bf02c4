"""Renderers (pygame canvases, block commands) and their sinks."""
