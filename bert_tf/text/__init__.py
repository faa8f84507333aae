"""The tokenizer and packing in-graph (tensorflow-text), for tf.data and SavedModels.

BertTextTokenizer is the package's public face (bert_tf.text.tokenizer)."""

from bert_tf.text.tokenizer import BertTextTokenizer
