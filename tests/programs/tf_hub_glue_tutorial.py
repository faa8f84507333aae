"""TF Hub's "Solve GLUE tasks using BERT" tutorial on the TF Hub exports, under tf_keras (Keras
2, as hub.KerasLayer needs: run with TF_USE_LEGACY_KERAS=1), bert_tf not imported
(tests/test_export_tfhub.py). argv: the preprocessor, the encoder, a folder for the saved
models, the JSON of {"a", "b", "labels", "seq_length"}; prints the packed inputs and logits."""

import json
import sys

import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (the preprocessor's ops)

assert not any(m.startswith("bert_tf") for m in sys.modules)
assert tf.keras.__name__.startswith("tf_keras")
preprocessor_dir, encoder_dir, out_dir, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
args = json.loads(args)
tf.keras.utils.set_random_seed(0)

# TF Hub's "Solve GLUE tasks using BERT" tutorial: make_bert_preprocess_model ...
inputs = [tf.keras.layers.Input(shape=(), dtype=tf.string, name=n)
          for n in ("sentence1", "sentence2")]
preprocess = hub.load(preprocessor_dir)
tokenizer = hub.KerasLayer(preprocess.tokenize, name="tokenizer")
packer = hub.KerasLayer(preprocess.bert_pack_inputs,
                        arguments=dict(seq_length=args["seq_length"]), name="packer")
preprocess_model = tf.keras.Model(inputs, packer([tokenizer(s) for s in inputs]))


# ... build_classifier_model ...
class Classifier(tf.keras.Model):

  def __init__(self, num_classes):
    super().__init__(name="prediction")
    self.encoder = hub.KerasLayer(encoder_dir, trainable=True)
    self.dropout = tf.keras.layers.Dropout(0.1)
    self.dense = tf.keras.layers.Dense(num_classes)

  def call(self, preprocessed_text):
    return self.dense(self.dropout(self.encoder(preprocessed_text)["pooled_output"]))


# ... one step of fine-tuning on the preprocessed pairs ...
a, b = tf.constant(args["a"]), tf.constant(args["b"])
packed = preprocess_model([a, b])
classifier = Classifier(2)
classifier.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                   loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
classifier.fit(packed, tf.constant(args["labels"]), epochs=1, verbose=0)

# ... and the export: text in, logits out, saved and loaded back.
model_for_export = tf.keras.Model(inputs, classifier(preprocess_model(inputs)))
out = {"packed": {k: v.numpy().tolist() for k, v in packed.items()},
       "logits": model_for_export([a, b], training=False).numpy().tolist()}
model_for_export.save(out_dir + "/keras_save", include_optimizer=False)
tf.saved_model.save(model_for_export, out_dir + "/tf_save")
for kind in ("keras_save", "tf_save"):
  reloaded = tf.saved_model.load(out_dir + "/" + kind)
  serving = reloaded.signatures["serving_default"](sentence1=a, sentence2=b)
  out[kind] = {"call": reloaded([a, b], training=False).numpy().tolist(),
               "serving": [v.numpy().tolist() for v in serving.values()]}
print(json.dumps(out))
