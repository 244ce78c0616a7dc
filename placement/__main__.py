"""`python -m placement` is `gpuplan`."""

from placement.cli import entry

entry()
