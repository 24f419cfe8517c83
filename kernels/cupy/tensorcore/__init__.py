"""The tensor-core ladder of the CuPy family: tc01_mma_sync.cu … tc09_registers_tma_store.cu, declared in
variants.py."""
