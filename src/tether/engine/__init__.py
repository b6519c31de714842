"""The workflow engine: definitions, expressions and (elsewhere) the runner that executes them."""
