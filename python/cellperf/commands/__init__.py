"""One module per `cellperf` subcommand: a docstring (the help; its first line the summary),
`add_arguments(parser)` and `run(args)`. See `cellperf.cli`."""
