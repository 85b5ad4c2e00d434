"""The ``rivven`` command: a thin layer that parses, calls the engine and renders."""
