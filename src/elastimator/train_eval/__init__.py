"""train_and_evaluate, its specs, exporters, evaluation policies and early stopping."""
