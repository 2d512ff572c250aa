"""`mastemu bench gms|rms|day|tetris`: MAST's scalability figures, measured on the emulator."""
