"""What a user writes against: EstimatorSpec, RunConfig and the cluster it reads, ModeKeys, warm starts.

Small, typed, with tf.estimator 2.15's signatures; nothing here runs a graph.
"""
