"""Everything the TF Hub preprocessor and encoder exports give (tests/test_export_tfhub.py).
argv: the JSON of {"texts", "a", "b", "pair_seq", "positions"}, the preprocessor, the encoder."""

import json

from serving import arguments_and_models
import tensorflow as tf

args, (preprocessor, encoder) = arguments_and_models()


def lists(d):
  return {k: (v.to_list() if isinstance(v, tf.RaggedTensor) else
              [t.numpy().tolist() for t in v] if isinstance(v, list) else v.numpy().tolist())
          for k, v in d.items()}


inputs = preprocessor(tf.constant(args["texts"]))
out = {"inputs": lists(inputs), "outputs": lists(encoder(inputs, training=False)),
       "default_training": lists(encoder(inputs)), "dropout": lists(encoder(inputs, training=True))}
a = preprocessor.tokenize(tf.constant(args["a"]))
b = preprocessor.tokenize(tf.constant(args["b"]))
out["tokenized"] = a.to_list()
out["special"] = lists(preprocessor.tokenize.get_special_tokens_dict())
out["pairs"] = lists(preprocessor.bert_pack_inputs([a, b], seq_length=args["pair_seq"]))
out["pairs_flat"] = lists(preprocessor.bert_pack_inputs([a.merge_dims(1, 2), b.merge_dims(1, 2)],
                                                        seq_length=tf.constant(args["pair_seq"])))
out["singles"] = lists(preprocessor.bert_pack_inputs([a]))
mlm = encoder.mlm(dict(inputs, masked_lm_positions=tf.constant(args["positions"])), training=False)
out["mlm"] = lists(mlm)
out["signature"] = lists(encoder.signatures["serving_default"](**inputs))
out["preprocessor_signature"] = lists(preprocessor.signatures["serving_default"](
    sentences=tf.constant(args["texts"])))
out["attributes"] = {
    "vocab_file": open(encoder.vocab_file.asset_path.numpy().decode(), encoding="utf-8").read(),
    "do_lower_case": bool(encoder.do_lower_case.numpy()),
    "strip_accents": bool(encoder.strip_accents.numpy()),
    "variables": len(encoder.variables), "trainable": len(encoder.trainable_variables),
    "mlm_trainable": len(encoder.mlm.trainable_variables),
    "regularization_losses": len(encoder.regularization_losses)}
print(json.dumps(out))
