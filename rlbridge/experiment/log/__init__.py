"""The message log: the writer, the reader, replay and verification, and their commands."""
