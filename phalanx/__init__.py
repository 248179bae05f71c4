"""The `phalanx` command line: one console script whose subcommands start each process."""
