"""`python -m placement` is `gpuplan`."""

from placement.cli.main import entry

entry()
