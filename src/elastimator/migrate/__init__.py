"""What moving code from tf.estimator to elastimator needs, readable without TensorFlow: the table of what
elastimator serves (`surface`) and the source checker behind `elastimator check` (`check`)."""
