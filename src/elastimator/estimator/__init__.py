"""The engine: Estimator, EstimatorSpec, RunConfig and the verbs behind them."""
