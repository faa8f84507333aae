"""The whole BERT pipeline on the sample data in data/, in one command (~7 minutes on 2 CPUs).

  python demo.py [--output_dir=demo_output] [--quick] [--clean]

Runs the project's real runner scripts, one subprocess per stage, printing each
command first so you can copy it:
  1. create_pretraining_data.py  data/pretraining_corpus.txt -> masked-LM / next-sentence TFRecords
  2. run_pretraining.py          a tiny BERT (2 layers, hidden 128) pretrained from scratch
  3. run_classifier.py           fine-tuned on data/mrpc_sample (MRPC format), evaluated,
                                 exported as a SavedModel that takes raw text
  4. ask.py (written into --output_dir) answers sentence pairs from that SavedModel in a
     fresh process that imports only tensorflow and tensorflow_text.

Re-running skips the stages whose output is complete (an interrupted pretraining
resumes from its last checkpoint); --clean empties --output_dir and starts over.
--quick runs a few steps of everything at a small sequence length (for the tests).
The demo itself uses only the standard library (and bert_tf.errors); the stages need
requirements.txt. A problem is one line on stderr and exit code 2, as in the runners.
"""

import argparse
import collections
import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from bert_tf.errors import UserInputError

REPO = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(REPO, "data")
SETTINGS_FILE = "demo_settings.json"
LOCK_FILE = ".demo.lock"

# The tiny BERT: small enough to pretrain on 2 CPUs in minutes.
TINY_CONFIG = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 128, "initializer_range": 0.02, "intermediate_size": 512,
    "max_position_embeddings": 128, "num_attention_heads": 2, "num_hidden_layers": 2,
    "type_vocab_size": 2,
}

# Chosen by measurement on 2 CPUs. Next-sentence prediction, and with it the
# [CLS] vector the classifier reads, becomes informative only after ~1500-2000
# steps: from a 500-step checkpoint the classifier stays at chance, from 2000
# steps it reaches ~0.80 on the MRPC sample. The masked-LM softmax over the
# 30,522-word vocabulary is the largest part of a step, so at most 5 words per
# sequence are masked: ~20% faster, with the same classifier accuracy as 10.
FULL = dict(max_seq_length=64, max_predictions_per_seq=5, dupe_factor=5,
            pretrain_steps=2000, pretrain_warmup=200, pretrain_lr="1e-3", save_steps=500,
            log_steps=100, finetune_lr="2e-4", finetune_epochs="5")
QUICK = dict(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
             pretrain_steps=20, pretrain_warmup=2, pretrain_lr="1e-3", save_steps=10,
             log_steps=10, finetune_lr="2e-4", finetune_epochs="0.1")

# Pairs for the fresh-process answer (names not in the data), with the truth.
PAIRS = [
    ("About 12,400 people live in Lornhaven.", "Lornhaven has a population of 12,400.",
     "a paraphrase"),
    ("Lornhaven has a population of 12,400.",
     "The Brindlecombe Owls beat the Marrowfield Stags 3 to 1.", "not a paraphrase"),
]

ASK_SCRIPT = '''"""Answers sentence pairs with the demo's SavedModel; needs only tensorflow(-text).

  python ask.py SAVED_MODEL_DIR "first sentence" "second sentence" [more pairs ...]

Prints one line per pair: answer: {"label": ..., "probabilities": [p(0), p(1)], ...}
(label 1 = the two sentences state the same fact).
"""

import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops inside the SavedModel)


def main(argv):
  if len(argv) < 4 or len(argv) % 2:
    sys.exit(__doc__)
  model = tf.saved_model.load(argv[1])
  first, second = argv[2::2], argv[3::2]
  out = model.signatures["serving_default"](text_a=tf.constant(first),
                                            text_b=tf.constant(second))
  for i, (a, b) in enumerate(zip(first, second)):
    print("answer: " + json.dumps({
        "text_a": a, "text_b": b, "label": out["labels"][i].numpy().decode(),
        "probabilities": [float(p) for p in out["probabilities"][i].numpy()]}))
  print("imported bert_tf: %s" % ("bert_tf" in sys.modules))


if __name__ == "__main__":
  main(sys.argv)
'''


def shown(path):
  """A path as the user would type it: relative to the current folder when inside it."""
  relative = os.path.relpath(path)
  return path if relative.startswith("..") else relative


def write_atomically(path, text):
  """Readers never see half a file: write beside it, then rename."""
  tmp = path + ".partial"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)


def banner(text):
  print("\n" + "=" * 78 + "\n" + text + "\n" + "=" * 78, flush=True)


class Demo:
  """Runs the stages into one output folder and collects what to report."""

  def __init__(self, output_dir, quick):
    self.out = os.path.abspath(output_dir)
    self.quick = quick
    self.s = QUICK if quick else FULL
    self.logs = os.path.join(self.out, "logs")
    self.paths = {
        "config": os.path.join(self.out, "bert_config.json"),
        "records": os.path.join(self.out, "pretraining_data.tfrecord"),
        "pretraining": os.path.join(self.out, "pretraining"),
        "classifier": os.path.join(self.out, "classifier"),
        "saved_model": os.path.join(self.out, "saved_model"),
        "ask": os.path.join(self.out, "ask.py"),
    }
    self.times = {}

  # ------------------------------------------------------------------ set-up

  def prepare(self):
    """Creates the folder, or checks that it holds a demo run with the same settings."""
    settings = dict(self.s, quick=self.quick)
    settings_path = os.path.join(self.out, SETTINGS_FILE)
    if os.path.exists(settings_path):
      with open(settings_path, encoding="utf-8") as f:
        previous = json.load(f)
      if previous != settings:
        raise UserInputError(
            "%s holds a demo run with other settings (%s); pass --clean to start over or "
            "choose another --output_dir." %
            (shown(self.out), "quick" if previous.get("quick") else "full"))
    os.makedirs(self.logs, exist_ok=True)
    write_atomically(settings_path, json.dumps(settings, indent=1, sort_keys=True) + "\n")
    with open(os.path.join(DATA, "vocab.txt"), encoding="utf-8") as f:
      vocab_size = sum(1 for _ in f)
    config = dict(TINY_CONFIG, vocab_size=vocab_size)
    if not os.path.exists(self.paths["config"]):
      write_atomically(self.paths["config"], json.dumps(config, indent=2, sort_keys=True) + "\n")
    if not os.path.exists(self.paths["ask"]):
      write_atomically(self.paths["ask"], ASK_SCRIPT)

  # ------------------------------------------------------------------ stages

  def run(self, name, script, flags):
    """Prints the command, runs it streaming its output, and keeps a copy in logs/."""
    command = [shown(sys.executable), shown(os.path.join(REPO, script))]
    command += ["--%s=%s" % (k, v) for k, v in flags]
    quoted = [shlex.quote(c) for c in command]
    print("$ " + " ".join(quoted[:2]) + "".join(" \\\n    " + c for c in quoted[2:]), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log_path = os.path.join(self.logs, name + ".log")
    start = time.monotonic()
    with open(log_path, "a", encoding="utf-8") as log:
      log.write("$ %s\n" % " ".join(shlex.quote(c) for c in command))
      process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, bufsize=1, env=env)
      lines = []
      for line in process.stdout:
        sys.stderr.write(line)
        sys.stderr.flush()
        log.write(line)
        lines.append(line)
      code = process.wait()
    self.times[name] = time.monotonic() - start
    if code:
      raise UserInputError("stage %s failed (exit code %d); its output is in %s" %
                           (name, code, shown(log_path)))
    return lines

  def skip(self, name, what):
    print("skipped: %s already exists (--clean starts over)" % shown(what), flush=True)
    self.times[name] = None

  def create_pretraining_data(self):
    banner("[1/4] create_pretraining_data.py: masked-LM / next-sentence records from raw text")
    if os.path.exists(self.paths["records"]):  # the runner renames it into place when complete
      return self.skip("create_pretraining_data", self.paths["records"])
    self.run("create_pretraining_data", "create_pretraining_data.py", [
        ("input_file", shown(os.path.join(DATA, "pretraining_corpus.txt"))),
        ("output_file", shown(self.paths["records"])),
        ("vocab_file", shown(os.path.join(DATA, "vocab.txt"))),
        ("do_lower_case", "True"),
        ("max_seq_length", self.s["max_seq_length"]),
        ("max_predictions_per_seq", self.s["max_predictions_per_seq"]),
        ("masked_lm_prob", "0.15"), ("random_seed", "12345"),
        ("dupe_factor", self.s["dupe_factor"]),
    ])

  def checkpoint_prefix(self):
    return os.path.join(self.paths["pretraining"], "model.ckpt-%d" % self.s["pretrain_steps"])

  def run_pretraining(self):
    banner("[2/4] run_pretraining.py: a tiny BERT from scratch (%d steps)" %
           self.s["pretrain_steps"])
    folder = self.paths["pretraining"]
    if (os.path.exists(self.checkpoint_prefix() + ".index")
        and os.path.exists(os.path.join(folder, "eval_results.txt"))):
      return self.skip("run_pretraining", self.checkpoint_prefix())
    if os.path.isdir(os.path.join(folder, "training_state")):
      print("resuming: run_pretraining.py continues from its last checkpoint in %s" %
            shown(folder), flush=True)
    self.run("run_pretraining", "run_pretraining.py", [
        ("input_file", shown(self.paths["records"])),
        ("output_dir", shown(folder)),
        ("do_train", "True"), ("do_eval", "True"),
        ("bert_config_file", shown(self.paths["config"])),
        ("train_batch_size", 32),
        ("max_seq_length", self.s["max_seq_length"]),
        ("max_predictions_per_seq", self.s["max_predictions_per_seq"]),
        ("num_train_steps", self.s["pretrain_steps"]),
        ("num_warmup_steps", self.s["pretrain_warmup"]),
        ("learning_rate", self.s["pretrain_lr"]),
        ("save_checkpoints_steps", self.s["save_steps"]),
        ("iterations_per_loop", self.s["log_steps"]),
    ])

  def run_classifier(self):
    banner("[3/4] run_classifier.py: fine-tune on data/mrpc_sample, evaluate, export")
    eval_results = os.path.join(self.paths["classifier"], "eval_results.txt")
    exported = os.path.exists(os.path.join(self.paths["saved_model"], "saved_model.pb"))
    if os.path.exists(eval_results) and exported:
      return self.skip("run_classifier", self.paths["saved_model"])
    if exported:
      raise UserInputError("%s exists but %s does not; pass --clean to start over." %
                           (shown(self.paths["saved_model"]), shown(eval_results)))
    self.run("run_classifier", "run_classifier.py", [
        ("task_name", "MRPC"), ("do_train", "True"), ("do_eval", "True"),
        ("data_dir", shown(os.path.join(DATA, "mrpc_sample"))),
        ("vocab_file", shown(os.path.join(DATA, "vocab.txt"))),
        ("bert_config_file", shown(self.paths["config"])),
        ("init_checkpoint", shown(self.checkpoint_prefix())),
        ("max_seq_length", self.s["max_seq_length"]),
        ("train_batch_size", 32), ("eval_batch_size", 32),
        ("learning_rate", self.s["finetune_lr"]),
        ("num_train_epochs", self.s["finetune_epochs"]),
        ("output_dir", shown(self.paths["classifier"])),
        ("export_dir", shown(self.paths["saved_model"])),
    ])

  def ask(self):
    banner("[4/4] ask.py: the SavedModel answers raw text in a fresh process "
           "(tensorflow + tensorflow_text only)")
    command = [shown(sys.executable), shown(self.paths["ask"]), shown(self.paths["saved_model"])]
    for a, b, _ in PAIRS:
      command += [a, b]
    print("$ " + " ".join(shlex.quote(c) for c in command), flush=True)
    start = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    self.times["ask"] = time.monotonic() - start
    sys.stderr.write(result.stderr)
    sys.stdout.write(result.stdout)
    if result.returncode:
      raise UserInputError("ask.py failed (exit code %d)" % result.returncode)
    return [json.loads(line[len("answer: "):]) for line in result.stdout.splitlines()
            if line.startswith("answer: ")]

  # ------------------------------------------------------------------ report

  def pretraining_losses(self):
    """(first, last) (step, loss) of training, read from the stage's log."""
    first = last = None
    path = os.path.join(self.logs, "run_pretraining.log")
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        for line in f:
          progress = re.match(r"train: (\d+)/\d+ steps .* loss ([\d.]+)", line)
          if progress and first is None:
            first = (int(progress.group(1)), float(progress.group(2)))
          logged = re.search(r"step (\d+): loss ([\d.]+)", line)
          if logged:
            last = (int(logged.group(1)), float(logged.group(2)))
    return first, last

  def report(self, answers, wall):
    pre = read_results(os.path.join(self.paths["pretraining"], "eval_results.txt"))
    cls = read_results(os.path.join(self.paths["classifier"], "eval_results.txt"))
    first, last = self.pretraining_losses()
    majority = majority_rate(os.path.join(DATA, "mrpc_sample", "dev.tsv"))
    banner("Demo finished in %s%s" % (minutes(wall), " (--quick: numbers not meaningful)"
                                      if self.quick else ""))
    print("Stage times: " + ", ".join(
        "%s %s" % (name, "skipped" if t is None else minutes(t))
        for name, t in self.times.items()))
    if first and last:
      print("Pretraining loss (one batch): %.3f at step %d -> %.3f at step %d" %
            (first[1], first[0], last[1], last[0]))
    print("Pretraining eval: loss %s, masked-LM accuracy %s, next-sentence accuracy %s" %
          (pre.get("loss"), pre.get("masked_lm_accuracy"), pre.get("next_sentence_accuracy")))
    print("MRPC-sample dev set: eval_accuracy %s, eval_f1 %s (always answering the majority "
          "class: %.3f)" % (cls.get("eval_accuracy"), cls.get("eval_f1"), majority))
    print("Fresh-process answers (truth in brackets):")
    for answer, (_, _, truth) in zip(answers, PAIRS):
      print("  %r / %r -> label %s, probabilities [%s]  [%s]" % (
          answer["text_a"], answer["text_b"], answer["label"],
          ", ".join("%.3f" % p for p in answer["probabilities"]), truth))
    print("\nWhere everything went (%s):" % shown(self.out))
    for path, what in [
        (self.paths["config"], "the tiny BERT's config"),
        (self.paths["records"], "pretraining records (step 1)"),
        (self.paths["pretraining"], "pretraining: model.ckpt-%d (Google layout), "
         "eval_results.txt, TensorBoard events" % self.s["pretrain_steps"]),
        (self.paths["classifier"], "fine-tuning: features, checkpoints, eval_results.txt"),
        (self.paths["saved_model"], "SavedModel: raw text in, label and probabilities out"),
        (self.paths["ask"], "the fresh-process client"),
        (self.logs, "each stage's full output"),
    ]:
      print("  %-40s %s" % (shown(path), what))
    print("\nAsk your own pair:\n  %s %s %s %s %s" % (
        shown(sys.executable), shown(self.paths["ask"]), shown(self.paths["saved_model"]),
        shlex.quote("The Brindlecombe Owls beat the Marrowfield Stags 2 to 0."),
        shlex.quote("The Marrowfield Stags lost 0-2 to the Brindlecombe Owls.")))


def read_results(path):
  """eval_results.txt (`key = value` lines) as {key: value rounded for printing}."""
  results = collections.defaultdict(lambda: "?")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(" = ")
        try:
          results[key.strip()] = "%.3f" % float(value)
        except ValueError:
          results[key.strip()] = value.strip()
  return results


def majority_rate(path):
  """Accuracy of always answering the commoner label: the bar to beat."""
  with open(path, encoding="utf-8") as f:
    labels = [line.split("\t", 1)[0] for line in f.read().splitlines()[1:] if line]
  return max(labels.count("0"), labels.count("1")) / len(labels)


def minutes(seconds):
  return "%dm%02ds" % (seconds // 60, seconds % 60)


def main():
  """Runs the demo; a problem is one line "error: ..." on stderr and exit code 2."""
  try:
    run_demo()
  except UserInputError as e:
    print("error: %s" % e, file=sys.stderr)
    sys.exit(2)


def run_demo():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output_dir", default="demo_output",
                      help="where every stage writes (default: demo_output)")
  parser.add_argument("--quick", action="store_true",
                      help="a few steps of each stage at sequence length 32 (seconds, not minutes)")
  parser.add_argument("--clean", action="store_true",
                      help="delete --output_dir first and start over")
  args = parser.parse_args()
  start = time.monotonic()
  out = os.path.abspath(args.output_dir)
  if is_foreign(out):
    raise UserInputError(
        "%s exists and is not a demo output folder; choose another --output_dir%s." %
        (shown(out), " (--clean deletes only demo output folders)" if args.clean else ""))
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, LOCK_FILE), "w") as lock:
    try:  # released by the OS when this process ends, however it ends
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
      raise UserInputError("another demo.py is running in %s." % shown(out)) from None
    if args.clean:
      print("--clean: deleting the contents of %s" % shown(out), flush=True)
      for name in sorted(set(os.listdir(out)) - {LOCK_FILE}):
        path = os.path.join(out, name)
        if os.path.isdir(path):
          shutil.rmtree(path)
        else:
          os.remove(path)
    run_stages(Demo(out, args.quick), start)


def is_foreign(out):
  """True for an existing folder with files that a demo run did not make."""
  if not os.path.exists(out):
    return False
  if not os.path.isdir(out):
    return True
  names = set(os.listdir(out)) - {LOCK_FILE}
  return bool(names) and SETTINGS_FILE not in names


def run_stages(demo, start):
  demo.prepare()
  demo.create_pretraining_data()
  demo.run_pretraining()
  demo.run_classifier()
  answers = demo.ask()
  demo.report(answers, time.monotonic() - start)


if __name__ == "__main__":
  main()
