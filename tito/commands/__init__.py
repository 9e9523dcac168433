"""tito subcommands; each module exposes plain functions the CLI and tests call."""
