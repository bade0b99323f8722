"""A canned DNNClassifier: trains, evaluates, predicts, exports, then train_and_evaluate resumes it.

    python canned_program.py MODEL_DIR [info|default|basic_config]   (as custom_program.py)
"""

import logging
import sys

import numpy as np
import tensorflow as tf

model_dir, screen = sys.argv[1], (sys.argv[2:] or ["info"])[0]
if screen == "basic_config":
    logging.basicConfig(level=logging.INFO)
if screen != "default":
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
rng = np.random.RandomState(0)
x = rng.normal(size=(256, 3)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int64")
columns = [tf.feature_column.numeric_column("x", shape=[3])]
classifier = tf.estimator.DNNClassifier([8], columns, model_dir=model_dir)
train_input = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=None, shuffle=True)
eval_input = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=64, shuffle=False)
classifier.train(train_input, steps=250)
classifier.evaluate(eval_input)
predictions = list(classifier.predict(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x[:8]}, shuffle=False)))
spec = tf.feature_column.make_parse_example_spec(columns)
classifier.export_saved_model(model_dir + "/export", tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
tf.estimator.train_and_evaluate(classifier, tf.estimator.TrainSpec(train_input, max_steps=400),
                                tf.estimator.EvalSpec(eval_input, steps=None, throttle_secs=0))
print("DONE", len(predictions))
