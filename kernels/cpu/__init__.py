"""CPU baselines: they let anyone run the whole pipeline on a machine without a GPU."""
