"""The tensor-core ladder of the CuPy family: tc01_mma_sync.cu … tc07_registers.cu, declared in rungs.py."""
