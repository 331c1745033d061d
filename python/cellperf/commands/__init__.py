"""One module per `cellperf` subcommand; each defines `command` (a click command)."""
