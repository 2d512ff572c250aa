"""MAST's shared database: its schema, records, and repositories (queue, fleet, catalog, copies)."""
