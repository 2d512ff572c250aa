"""The `mastemu` command line: argument parsing, the commands, what they print.

Nothing imports this package; it calls the library (`emulator.run`, the
registries) and turns InputError into exit code 2.
"""
