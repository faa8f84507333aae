"""Shared by the benchmarks: their result records (printed as a table, written as JSON lines),
their common flags, the model of the comparisons with Hugging Face and ONNX Runtime, running
code in other interpreters (benchmarks/sides), the inference precisions to time, FLOP counts
and this machine's matmul peak.

Run a benchmark as `python -m benchmarks.NAME` from the checkout's root.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys

from absl import flags
import tensorflow as tf

from benchmarks import timing

# The checkout's root: the PYTHONPATH of the sides (benchmarks/sides), and where data/ is.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# all-MiniLM-L6-v2's shape (6 layers, hidden 384): the model of the serving and
# fine-tuning comparisons when no checkpoint is given.
MINILM_L6 = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
             "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
             "type_vocab_size": 2}

flags.DEFINE_string("json_out", None, "Also write the result records to this file, one JSON "
                    "object a line (benchmark, row, figures with their units, settings, "
                    "checks, CPU), for scripts and tests to read.")


def cpu_info():
  """The CPU that gave a figure: every record names it (bert_tf.utils.cpu.describe)."""
  from bert_tf.utils import cpu
  return cpu.describe()


@dataclasses.dataclass
class Record:
  """One row of a benchmark's results: what the table prints and --json_out writes."""
  benchmark: str
  row: str
  figures: dict  # figure name -> number
  units: dict  # figure name -> its unit ("" for a plain number)
  settings: dict = dataclasses.field(default_factory=dict)  # what the row ran with
  checks: dict = dataclasses.field(default_factory=dict)  # check name -> whether it held
  cpu: str = dataclasses.field(default_factory=cpu_info)


def _shown(value):
  if value is None:
    return "-"
  if isinstance(value, bool):
    return "yes" if value else "no"
  if isinstance(value, int):
    return str(value)
  if isinstance(value, float) and math.isfinite(value) and 1e4 <= abs(value) < 1e12:
    return "%.0f" % value
  return "%.4g" % value if isinstance(value, float) else str(value)


class Results:
  """A benchmark's records and the lines that say what they ran: `add` rows as they are
  measured, then `report` prints them all and writes --json_out."""

  def __init__(self, benchmark, settings=None):
    self.benchmark = benchmark
    self.settings = dict(settings or {})
    self.records, self.notes = [], []

  def add(self, row, figures, settings=None, checks=None):
    """A row: `figures` maps each figure's name to (value, unit); `settings` are the row's own
    beside the run's."""
    self.records.append(Record(
        self.benchmark, row, {k: v for k, (v, _) in figures.items()},
        {k: u for k, (_, u) in figures.items()}, dict(self.settings, **(settings or {})),
        dict(checks or {})))
    return self.records[-1]

  def note(self, line):
    self.notes.append(line)

  def report(self):
    """Prints the CPU, the run's settings and the notes, then the records as tables (one per
    run of rows with the same figures); writes the records to --json_out if given."""
    print("%s on CPU: %s" % (self.benchmark, cpu_info()))
    if self.settings:
      print("settings: " + ", ".join("%s=%s" % kv for kv in self.settings.items()))
    for line in self.notes:
      print(line)
    blocks = []
    for record in self.records:
      if not blocks or list(blocks[-1][0].figures) != list(record.figures):
        blocks.append([])
      blocks[-1].append(record)
    for block in blocks:
      print()
      print(_table(block, self.settings))
    if flags.FLAGS.json_out:
      with open(flags.FLAGS.json_out, "w", encoding="utf-8") as f:
        for record in self.records:
          f.write(json.dumps(dataclasses.asdict(record)) + "\n")
    return self.records


def _table(records, shared):
  """The text table of records with the same figures: a column per figure (with its unit), and
  the rows' own settings and checks where they have any."""
  names = list(records[0].figures)
  header = [""] + ["%s (%s)" % (n, records[0].units[n]) if records[0].units[n] else n
                    for n in names]
  rows = []
  for record in records:
    own = ["%s=%s" % (k, v) for k, v in record.settings.items()
           if k not in shared or shared[k] != v]
    checks = ["%s: %s" % (k, _shown(v)) for k, v in record.checks.items()]
    rows.append([record.row] + [_shown(record.figures[n]) for n in names] +
                ["; ".join(own + checks)])
  header.append("settings, checks" if any(row[-1] for row in rows) else "")
  widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
  lines = []
  for row in [header] + rows:
    cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:-1], widths[1:-1])]
    lines.append(("  ".join(cells) + "  " + row[-1]).rstrip())
  return "\n".join(lines)


def define_workload_flags(batch_size, batch_size_help, iterations, iterations_help,
                          dtype_flag=True):
  """The size, precision (--dtype, unless the benchmark times --precisions) and repeats of the
  BERT-Base timings against the matmul peak."""
  flags.DEFINE_integer("batch_size", batch_size, batch_size_help)
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("num_layers", 12, "Encoder layers (BERT-Base: 12).")
  flags.DEFINE_integer("iterations", iterations, iterations_help)
  flags.DEFINE_integer("matmul_size", 4096, "Side of the square matrices of the matmul peak.")
  if not dtype_flag:
    return
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                    "Compute type: float32, or bfloat16 (Keras mixed_bfloat16: matmuls in "
                    "bfloat16, variables and LayerNorm in float32). The peak printed is the "
                    "matmul peak of the same type.")


def dtype_policy():
  """The Keras dtype policy of --dtype (None: float32)."""
  return "mixed_bfloat16" if flags.FLAGS.dtype == "bfloat16" else None


def define_hf_comparison_flags(peers=False, default_shape="MiniLM-L6 shape"):
  """The model (random and of `default_shape` unless a config or checkpoint is given) and the
  peers' interpreters: transformers (--hf_python) and, with `peers`, ONNX Runtime and how
  torch's threads wait."""
  flags.DEFINE_string("bert_config_file", None, "Model config (default: the config.json of an "
                      "HF folder given as --init_checkpoint or --hf_model_dir, else the %s)."
                      % default_shape)
  flags.DEFINE_string("init_checkpoint", None, "Google-layout checkpoint or HF folder.")
  flags.DEFINE_string("hf_python", None, "A Python with torch + transformers, for the comparison.")
  flags.DEFINE_string("hf_model_dir", None, "HF folder with the same weights (else random).")
  if peers:
    flags.DEFINE_bool("hf_passive_omp", True, "Run the torch peer with OMP_WAIT_POLICY=PASSIVE. "
                      "On a busy machine torch's spinning OpenMP threads wait for each other "
                      "at every operator (docs/performance.md); --nohf_passive_omp keeps "
                      "torch's own default, which can be a little faster on an idle machine.")
    flags.DEFINE_string("ort_python", None, "A Python with onnxruntime, onnx, onnxscript, torch "
                        "and transformers: exports the same transformers model with torch.onnx "
                        "and times it in ONNX Runtime, float32 and dynamic int8.")


def comparison_config(default=None):
  """The BertConfig of --bert_config_file, else of the HF folder given as --init_checkpoint or
  --hf_model_dir (so that both sides run the same shape), else `default` (MiniLM-L6's shape)."""
  from bert_tf.checkpoints import hf_files
  from bert_tf.config import BertConfig
  config_file = flags.FLAGS.bert_config_file
  if config_file:
    return BertConfig.from_json_file(config_file)
  for folder in (flags.FLAGS.init_checkpoint, flags.FLAGS.hf_model_dir):
    if folder and hf_files.is_hf_folder(folder):
      path = os.path.join(folder, "config.json")
      return BertConfig.from_hf_dict(hf_files.read_json(path, "Hugging Face config"), path)
  if flags.FLAGS.init_checkpoint:
    sys.exit("--init_checkpoint=%s is not a Hugging Face folder: give its --bert_config_file "
             "too." % flags.FLAGS.init_checkpoint)
  return default or BertConfig(**MINILM_L6)


def check_hf_model_shape(config):
  """Exits with one line if --hf_model_dir's shape differs from the bert_tf side's `config`:
  the figures would not compare the same model."""
  folder = flags.FLAGS.hf_model_dir
  if not folder:
    return
  path = os.path.join(folder, "config.json")
  try:
    with open(path, encoding="utf-8") as f:
      theirs = json.load(f)
  except (OSError, ValueError) as e:
    sys.exit("--hf_model_dir=%s: cannot read config.json (%s)." % (folder, e))
  ours = hf_config(config)
  different = sorted(k for k in ours if k in theirs and theirs[k] != ours[k])
  if different:
    sys.exit("--hf_model_dir=%s has another shape than the bert_tf model (%s); give "
             "--init_checkpoint=%s or the matching --bert_config_file." %
             (folder, ", ".join("%s %s vs %s" % (k, theirs[k], ours[k]) for k in different),
              folder))


def define_precisions_flag():
  """--precisions: the inference precisions to time, on every side."""
  flags.DEFINE_list("precisions", None, "Inference precisions to time on every side (bert_tf "
                    "through bert_tf.utils.precision.for_inference; the peers' own float32, "
                    "bfloat16 autocast and dynamic int8): float32, bfloat16, int8. Default: "
                    "float32,int8, plus bfloat16 where the CPU has AVX-512 (elsewhere "
                    "TensorFlow's bfloat16 matmuls fall back to Eigen, slower than float32: "
                    "0.74x for MiniLM-L6 on an AMD EPYC AVX2, up to 30x on small batches).")


def selected_precisions():
  """(the precisions of --precisions in float32, bfloat16, int8 order, a note on what the
  default left out or None)."""
  from bert_tf.utils import cpu, precision
  chosen = flags.FLAGS.precisions
  if chosen:
    unknown = [p for p in chosen if p not in precision.PRECISIONS]
    if unknown:
      sys.exit("--precisions: unknown %s; use some of %s." %
               (", ".join(unknown), ", ".join(precision.PRECISIONS)))
    return [p for p in precision.PRECISIONS if p in chosen], None
  if cpu.fast_bfloat16():
    return list(precision.PRECISIONS), None
  return ["float32", "int8"], ("bfloat16: skipped: no AVX-512 on this CPU (bfloat16 matmuls "
                               "fall back to slow kernels; --precisions=float32,bfloat16,int8 "
                               "times it anyway)")


def define_jit_compile_flag(what, default):
  """--jit_compile, as extract_features.py's: unset, each bert_tf row runs `what` as the product
  does (`default` says how); --jit_compile / --nojit_compile force XLA / the graph executor."""
  flags.DEFINE_bool("jit_compile", None, "Compile bert_tf's %s with XLA (--jit_compile) or run "
                    "it in TensorFlow's graph executor (--nojit_compile). Default: %s. Each row "
                    "says which it used." % (what, default))


def jit_compile(product_default):
  """Whether a bert_tf row runs under XLA: --jit_compile if given, else `product_default` (for
  a forward pass, precision.prefers_xla of the row's precision)."""
  return product_default if flags.FLAGS.jit_compile is None else flags.FLAGS.jit_compile


def mode_name(jit):
  """How a row ran, as printed beside it."""
  return "XLA" if jit else "graph"


def hf_config(config):
  """The fields of `config` that transformers' BertConfig takes, for its random model."""
  return {k: v for k, v in config.to_dict().items() if k in MINILM_L6}


def run_side(python, side, command, arguments, failure="measurement failed", env=None,
             first_on_path=None, cwd=None):
  """`python -m benchmarks.sides.<side> <command> <arguments as JSON>`: the checkout's root
  (after `first_on_path`, if given) is the process's only PYTHONPATH, so that it imports the
  sides but nothing installed in this interpreter; `env` is added to its environment. Returns
  the JSON of its last output line; exits with its stderr's tail if it fails."""
  environment = dict(os.environ, **(env or {}))
  environment["PYTHONPATH"] = os.pathsep.join(p for p in (first_on_path, ROOT) if p)
  result = subprocess.run([python, "-m", "benchmarks.sides." + side, command,
                           json.dumps(arguments)], capture_output=True, text=True,
                          env=environment, cwd=cwd)
  if result.returncode:
    sys.exit("%s:\n%s" % (failure, result.stderr[-3000:]))
  return json.loads(result.stdout.strip().splitlines()[-1])


def forward_flops(config, batch, seq):
  """Multiply-adds x 2 of the encoder: projections, FFN and the two attention matmuls."""
  hidden, intermediate = config.hidden_size, config.intermediate_size
  per_token_dense = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
  attention = 2 * 2 * seq * seq * hidden
  return batch * config.num_hidden_layers * (seq * per_token_dense + attention)


def matmul_peak_gflops(n=4096, repeats=5, dtype="float32"):
  """GFLOP/s of one large square matmul in `dtype`, best of `repeats`: the fair peak of a
  workload in that type (bfloat16 runs at several times float32's speed where the CPU has
  AMX or AVX512-BF16, and slower than it where the CPU has neither)."""
  a = tf.cast(tf.random.normal((n, n)), dtype)
  b = tf.cast(tf.random.normal((n, n)), dtype)
  matmul = tf.function(lambda x, y: tf.matmul(x, y))
  return 2 * n ** 3 / timing.best_seconds(lambda: matmul(a, b).numpy(), repeats) / 1e9
