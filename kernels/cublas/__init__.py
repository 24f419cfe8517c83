"""cuBLAS baseline through CuPy."""
