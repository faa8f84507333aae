"""Parity of a real Hugging Face BERT folder in bert_tf: convert it, run it, compare the numbers.

    python benchmarks/hf_parity.py --hf_model_dir=/path/to/all-MiniLM-L6-v2 \
        [--hf_python=/path/to/venv/bin/python] [--batch_size=8] [--max_seq_length=64]

Converts the folder to Google's layout (as convert_checkpoint.py --to=google does), loads
that into bert_tf's BertModel and runs sentence pairs from data/pretraining_corpus.txt
(tokenized with the folder's vocab.txt and tokenizer_config.json casing, packed as the
runners pack them). Prints the max abs difference of sequence_output (real positions) and
pooled_output against:
  - the numpy float64 forward pass of the folder's state dict from
    tests/test_hf_checkpoints.py (hidden_act "gelu" or "gelu_new");
  - with --hf_python, a Python with torch + transformers: transformers' own BertModel
    loaded with from_pretrained, in that interpreter, on the same ids; and the same for
    the folder bert_tf writes back (google -> hf), with the missing / unexpected keys
    transformers reports for it.
It also checks that hf -> google -> hf gives back every weight bit for bit. Opt-in: the
tests never run it (it needs a real model folder).
"""

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))

import bert_tf  # noqa: E402,F401
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("hf_model_dir", None, "A Hugging Face BERT folder (config.json, "
                    "model.safetensors, vocab.txt).")
flags.DEFINE_string("hf_python", None, "A Python with torch + transformers, for comparing "
                    "against transformers' own outputs.")
flags.DEFINE_integer("batch_size", 8, "Sentence pairs in the batch.")
flags.DEFINE_integer("max_seq_length", 64, "Packed length (the batch is padded to it).")

# Runs in --hf_python: transformers' BertModel on the saved inputs.
HF_SIDE = r'''
import json, sys
import numpy as np, torch, transformers
folder, inputs, output = sys.argv[1:4]
data = np.load(inputs)
try:
  model, info = transformers.BertModel.from_pretrained(folder, output_loading_info=True,
                                                       attn_implementation="eager")
except TypeError:
  model, info = transformers.BertModel.from_pretrained(folder, output_loading_info=True)
model.eval()
with torch.no_grad():
  out = model(input_ids=torch.tensor(data["ids"], dtype=torch.long),
              attention_mask=torch.tensor(data["mask"], dtype=torch.long),
              token_type_ids=torch.tensor(data["types"], dtype=torch.long))
np.savez(output, sequence_output=out.last_hidden_state.float().numpy(),
         pooled_output=out.pooler_output.float().numpy())
print(json.dumps({"missing": sorted(info.get("missing_keys", [])),
                  "unexpected": sorted(info.get("unexpected_keys", [])),
                  "transformers": transformers.__version__}))
'''


def _inputs(folder, batch_size, max_seq_length):
  from bert_tf import hf_checkpoints, packing, tokenization
  casing = hf_checkpoints.read_tokenizer_config(folder)
  tokenizer = tokenization.FullTokenizer(os.path.join(folder, "vocab.txt"),
                                         casing["do_lower_case"], casing["strip_accents"])
  lines = [l.strip() for l in open(os.path.join(REPO, "data", "pretraining_corpus.txt"))
           if l.strip()]
  packed = [packing.pack_tokens(tokenizer.tokenize(lines[2 * i]),
                                tokenizer.tokenize(lines[2 * i + 1]), max_seq_length, tokenizer)
            for i in range(batch_size)]
  return (np.array([p.input_ids for p in packed], np.int32),
          np.array([p.input_mask for p in packed], np.int32),
          np.array([p.segment_ids for p in packed], np.int32))


def _diffs(ours, theirs, mask):
  real = mask.astype(bool)
  return {"sequence_output": float(np.abs(ours["sequence_output"][real] -
                                          theirs["sequence_output"][real]).max()),
          "pooled_output": float(np.abs(ours["pooled_output"] - theirs["pooled_output"]).max())}


def _transformers_side(folder, inputs_path, work):
  output = os.path.join(work, "hf_out_%d.npz" % abs(hash(folder)))
  result = subprocess.run([FLAGS.hf_python, "-c", HF_SIDE, folder, inputs_path, output],
                          capture_output=True, text=True)
  if result.returncode:
    raise RuntimeError("transformers side failed:\n" + result.stderr[-3000:])
  info = json.loads(result.stdout.strip().splitlines()[-1])
  loaded = np.load(output)
  return {k: loaded[k] for k in loaded.files}, info


def main(_):
  if not FLAGS.hf_model_dir:
    raise app.UsageError("--hf_model_dir is required.")
  from bert_tf import checkpoints, conversion, hf_checkpoints
  from bert_tf.config import BertConfig
  from bert_tf.modeling import BertModel
  from test_hf_checkpoints import HF_ACTIVATIONS, numpy_reference_forward

  folder = FLAGS.hf_model_dir
  with open(os.path.join(folder, "config.json")) as f:
    hf_config = json.load(f)
  hf_config.setdefault("layer_norm_eps", 1e-12)
  hf_config.setdefault("hidden_act", "gelu")
  state, _ = hf_checkpoints.load_hf_state(folder)
  state = {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                      "LayerNorm.bias"): v
           for k, v in state.items()}
  ids, mask, types = _inputs(folder, FLAGS.batch_size, FLAGS.max_seq_length)

  with tempfile.TemporaryDirectory() as work:
    prefix, hf = conversion.convert_to_google(folder, os.path.join(work, "google"))
    config = BertConfig.from_json_file(os.path.join(work, "google", "bert_config.json"))
    print("%s: %d layers, hidden %d, HF hidden_act %r -> bert_tf %r, heads: %s" %
          (folder, config.num_hidden_layers, config.hidden_size, hf_config["hidden_act"],
           config.hidden_act, ", ".join(hf.heads) or "none"))
    encoder = BertModel(config)
    checkpoints.load_checkpoint(prefix, encoder)
    out = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    ours = {k: np.asarray(out[k]) for k in ("sequence_output", "pooled_output")}

    back = os.path.join(work, "hf_back")
    conversion.convert_to_hf(prefix, back)
    written = hf_checkpoints.load_safetensors(os.path.join(back, "model.safetensors"))
    tied = [k for k in state if k.endswith(("predictions.decoder.weight",
                                            "predictions.decoder.bias", "position_ids",
                                            "token_type_ids"))]
    same = sorted(written) == sorted(k for k in state if k not in tied) and all(
        np.array_equal(written[k], np.asarray(state[k], written[k].dtype)) for k in written)
    print("hf -> google -> hf: %d weights, bit-identical: %s" % (len(written), same))

    if hf_config["hidden_act"] in HF_ACTIVATIONS:
      reference = numpy_reference_forward(state, hf_config, ids, mask, types)
      print("bert_tf vs numpy float64 reference: max abs diff %s" %
            _diffs(ours, reference, mask))
    else:
      print("numpy reference skipped (hidden_act %r)" % hf_config["hidden_act"])

    if FLAGS.hf_python:
      inputs_path = os.path.join(work, "inputs.npz")
      np.savez(inputs_path, ids=ids, mask=mask, types=types)
      theirs, info = _transformers_side(folder, inputs_path, work)
      print("bert_tf vs transformers %s (source folder): max abs diff %s" %
            (info["transformers"], _diffs(ours, theirs, mask)))
      theirs_back, info_back = _transformers_side(back, inputs_path, work)
      print("transformers on bert_tf's written folder: missing keys %s, unexpected keys %s; "
            "vs bert_tf: max abs diff %s" % (info_back["missing"], info_back["unexpected"],
                                             _diffs(ours, theirs_back, mask)))


if __name__ == "__main__":
  app.run(main)
