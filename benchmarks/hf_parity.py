"""Parity of a real Hugging Face BERT folder in bert_tf: convert it, run it, compare the numbers.

    python -m benchmarks.hf_parity --hf_model_dir=/path/to/all-MiniLM-L6-v2 \
        [--hf_python=/path/to/venv/bin/python] [--batch_size=8] [--max_seq_length=64]

Converts the folder to Google's layout (as convert_checkpoint.py --to=google does), loads
that into bert_tf's BertModel and runs sentence pairs from data/pretraining_corpus.txt
(tokenized with the folder's vocab.txt and tokenizer_config.json casing, packed as the
runners pack them). Prints the max abs difference of sequence_output (real positions) and
pooled_output against:
  - the numpy float64 forward pass of the folder's state dict (benchmarks/numpy_bert.py;
    hidden_act "gelu" or "gelu_new");
  - with --hf_python, a Python with torch + transformers: transformers' own BertModel
    loaded with from_pretrained, in that interpreter, on the same ids; and the same for
    the folder bert_tf writes back (google -> hf), with the missing / unexpected keys
    transformers reports for it.
It also checks that hf -> google -> hf gives back every weight bit for bit. Made for a real
model folder; tests/test_benchmarks.py runs it on a tiny one. Prints figures only
(common.Results).
"""

import json
import os
import tempfile

import bert_tf  # noqa: F401  (TensorFlow environment defaults)  # isort: skip
from absl import app, flags
import numpy as np

from benchmarks import common, numpy_bert

FLAGS = flags.FLAGS
flags.DEFINE_string("hf_model_dir", None, "A Hugging Face BERT folder (config.json, "
                    "model.safetensors, vocab.txt).")
flags.DEFINE_string("hf_python", None, "A Python with torch + transformers, for comparing "
                    "against transformers' own outputs.")
flags.DEFINE_integer("batch_size", 8, "Sentence pairs in the batch.")
flags.DEFINE_integer("max_seq_length", 64, "Packed length (the batch is padded to it).")
flags.adopt_module_key_flags(common)  # --help lists the shared flags too


def _inputs(folder, batch_size, max_seq_length):
  """Consecutive lines of data/pretraining_corpus.txt as pairs, tokenized with the folder's
  vocabulary and casing, packed as the runners pack them: (ids, mask, types) int32."""
  from bert_tf import tokenization
  from bert_tf.checkpoints import hf_files
  from bert_tf.data import packing
  casing = hf_files.read_tokenizer_config(folder)
  tokenizer = tokenization.FullTokenizer(os.path.join(folder, "vocab.txt"),
                                         casing["do_lower_case"], casing["strip_accents"])
  with open(os.path.join(common.ROOT, "data", "pretraining_corpus.txt"), encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()]
  packed = [packing.pack_tokens(tokenizer.tokenize(lines[2 * i]),
                                tokenizer.tokenize(lines[2 * i + 1]), max_seq_length, tokenizer)
            for i in range(batch_size)]
  return (np.array([p.input_ids for p in packed], np.int32),
          np.array([p.input_mask for p in packed], np.int32),
          np.array([p.segment_ids for p in packed], np.int32))


def _differences(ours, theirs, mask):
  """The row's figures: max abs difference of each output (sequence_output at real tokens)."""
  real = mask.astype(bool)
  return {"sequence_output max |d|": (float(np.abs(
              ours["sequence_output"][real] - theirs["sequence_output"][real]).max()), ""),
          "pooled_output max |d|": (float(np.abs(
              ours["pooled_output"] - theirs["pooled_output"]).max()), "")}


def _transformers_side(folder, inputs_path, work):
  output = os.path.join(work, "hf_out_%d.npz" % abs(hash(folder)))
  info = common.run_side(FLAGS.hf_python, "hf", "parity",
                         {"folder": folder, "inputs": inputs_path, "output": output},
                         failure="transformers side failed")
  loaded = np.load(output)
  return {k: loaded[k] for k in loaded.files}, info


def main(_):
  if not FLAGS.hf_model_dir:
    raise app.UsageError("--hf_model_dir is required.")
  from bert_tf import checkpoints
  from bert_tf.checkpoints import conversion, hf_files
  from bert_tf.config import BertConfig
  from bert_tf.modeling import BertModel

  folder = FLAGS.hf_model_dir
  with open(os.path.join(folder, "config.json")) as f:
    hf_config = json.load(f)
  hf_config.setdefault("layer_norm_eps", 1e-12)
  hf_config.setdefault("hidden_act", "gelu")
  state, _ = hf_files.load_hf_state(folder)
  state = {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                      "LayerNorm.bias"): v
           for k, v in state.items()}
  ids, mask, types = _inputs(folder, FLAGS.batch_size, FLAGS.max_seq_length)

  with tempfile.TemporaryDirectory() as work:
    prefix, hf = conversion.convert_to_google(folder, os.path.join(work, "google"))
    config = BertConfig.from_json_file(os.path.join(work, "google", "bert_config.json"))
    results = common.Results("hf_parity", {
        "folder": folder, "layers": config.num_hidden_layers, "hidden": config.hidden_size,
        "batch_size": FLAGS.batch_size, "max_seq_length": FLAGS.max_seq_length})
    results.note("HF hidden_act %r -> bert_tf %r, heads: %s; inputs: sentence pairs of "
                 "data/pretraining_corpus.txt; max |d|: largest absolute difference from "
                 "bert_tf's output (sequence_output at real tokens)" %
                 (hf_config["hidden_act"], config.hidden_act, ", ".join(hf.heads) or "none"))
    encoder = BertModel(config)
    checkpoints.load_checkpoint(prefix, encoder)
    out = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    ours = {k: np.asarray(out[k]) for k in ("sequence_output", "pooled_output")}

    back = os.path.join(work, "hf_back")
    conversion.convert_to_hf(prefix, back)
    written = hf_files.load_safetensors(os.path.join(back, "model.safetensors"))
    tied = [k for k in state if k.endswith(("predictions.decoder.weight",
                                            "predictions.decoder.bias", "position_ids",
                                            "token_type_ids"))]
    same = sorted(written) == sorted(k for k in state if k not in tied) and all(
        np.array_equal(written[k], np.asarray(state[k], written[k].dtype)) for k in written)

    if hf_config["hidden_act"] in numpy_bert.ACTIVATIONS:
      reference = numpy_bert.encoder_outputs(state, hf_config, ids, mask, types)
      results.add("numpy float64 reference", _differences(ours, reference, mask))
    else:
      results.note("numpy reference skipped (hidden_act %r)" % hf_config["hidden_act"])

    if FLAGS.hf_python:
      inputs_path = os.path.join(work, "inputs.npz")
      np.savez(inputs_path, ids=ids, mask=mask, types=types)
      theirs, info = _transformers_side(folder, inputs_path, work)
      results.add("transformers, source folder", _differences(ours, theirs, mask),
                  {"version": info["version"]})
      theirs_back, info_back = _transformers_side(back, inputs_path, work)
      results.add("transformers, bert_tf's written folder",
                  _differences(ours, theirs_back, mask), {"version": info_back["version"]},
                  {"no missing keys": not info_back["missing"]})
      results.note("transformers on bert_tf's written folder: missing keys %s, unexpected keys "
                   "%s (a BertModel leaves the heads' weights unused)" %
                   (info_back["missing"], info_back["unexpected"]))
    results.add("hf -> google -> hf", {"weights": (len(written), "")},
                checks={"bit-identical": same})
  results.report()


if __name__ == "__main__":
  app.run(main)
