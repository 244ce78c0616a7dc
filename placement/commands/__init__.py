"""One module per `gpuplan` subcommand: HELP, add_arguments(parser), run(args) -> int."""
