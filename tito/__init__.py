"""tito: the TinyTorch course command line (export, test, release, benchmark)."""
