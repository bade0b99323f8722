"""One training call: what a step gives its hooks (`TrainingStep`), calls of several steps, how many steps a call
runs, and the gate that holds a call's writes until the host says they may go."""
