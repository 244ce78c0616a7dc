"""The `gpuplan` command line: argument parsing, snapshot sources, rendering, one module per command."""
