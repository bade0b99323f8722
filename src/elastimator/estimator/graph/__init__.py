"""Building one mode's graph: calling the user's model_fn (and input_fn), checking what it returned, and the
build-time swaps (Keras traps, fused updates) that are seen only by the code that builds."""
