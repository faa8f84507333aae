"""Flag definitions the runners share, with the original scripts' names, defaults and help.

Each runner defines its own flags (task, data files, task options) and calls these;
`bert_tf.runner.RunOptions.from_flags` reads exactly what they define into typed
options. Three groups: define_training_flags (every runner, hardware included),
define_eval_flags (--do_eval) and define_finetuning_flags (training + tokenizer +
--do_predict, epochs and --export_dir). `flag_values` lets tests define them on a
fresh FlagValues.
"""

from absl import flags

from bert_tf import cli, distribution, precision


def define_hardware_flags(flag_values=flags.FLAGS):
  """The original TPU flags plus how bert_tf uses GPUs, CPUs, precision and memory."""
  f = flag_values
  flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).",
                    flag_values=f)
  flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.", flag_values=f)
  flags.DEFINE_string("tpu_zone", None, "[Optional] GCE zone where the Cloud TPU is located in.",
                      flag_values=f)
  flags.DEFINE_string("gcp_project", None,
                      "[Optional] Project name for the Cloud TPU-enabled project.", flag_values=f)
  flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.", flag_values=f)
  flags.DEFINE_integer("num_tpu_cores", 8,
                       "Only used if `use_tpu` is True. Total number of TPU cores to use.",
                       flag_values=f)
  flags.DEFINE_enum("distribution_strategy", None, distribution.STRATEGIES,
                    "How to use the hardware (default: one_device, or tpu with --use_tpu).",
                    flag_values=f)
  flags.DEFINE_integer("cpu_devices", 1,
                       "With --distribution_strategy=mirrored and no GPU: split the CPU into this "
                       "many logical devices (for testing multi-device code paths).",
                       flag_values=f)
  flags.DEFINE_enum("mixed_precision", None, ["float16", "bfloat16"],
                    "Run matmuls in this type (LayerNorm, softmax and variables stay float32).",
                    flag_values=f)
  flags.DEFINE_bool("jit_compile", False, "Compile the training forward/backward pass with XLA.",
                    flag_values=f)
  flags.DEFINE_integer("gradient_accumulation_steps", 1,
                       "Split each train batch into this many micro-batches; the update equals "
                       "that of the whole batch.", flag_values=f)
  flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                    "adamw: the original AdamWeightDecay. lamb: LAMB with the same schedule.",
                    flag_values=f)
  flags.DEFINE_bool("pad_to_max_seq_length", False,
                    "Run every batch at --max_seq_length, as the original's fixed TPU shapes. By "
                    "default each batch is cut to its longest real sequence (a multiple of 16 "
                    "with --jit_compile), which gives the same numbers faster; SQuAD always "
                    "runs at full length.", flag_values=f)
  flags.DEFINE_integer("shuffle_seed", 12345,
                       "Seed of weight initialization, dropout and training input shuffles.",
                       flag_values=f)


def define_training_flags(max_seq_length, max_seq_length_help, train_batch_size=32,
                          learning_rate=5e-5, flag_values=flags.FLAGS):
  """Flags of every training runner, pretraining included."""
  f = flag_values
  flags.DEFINE_string("bert_config_file", None,
                      "The config json file corresponding to the pre-trained BERT model. "
                      "This specifies the model architecture.", flag_values=f)
  flags.DEFINE_string("output_dir", None,
                      "The output directory where the model checkpoints will be written.",
                      flag_values=f)
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (usually from a pre-trained BERT model).", flag_values=f)
  flags.DEFINE_integer("max_seq_length", max_seq_length, max_seq_length_help, flag_values=f)
  flags.DEFINE_bool("do_train", False, "Whether to run training.", flag_values=f)
  flags.DEFINE_integer("train_batch_size", train_batch_size, "Total batch size for training.",
                       flag_values=f)
  flags.DEFINE_float("learning_rate", learning_rate, "The initial learning rate for Adam.",
                     flag_values=f)
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.",
                       flag_values=f)
  flags.DEFINE_integer("iterations_per_loop", 1000,
                       "How often to log and write summaries (the original's TPU loop size).",
                       flag_values=f)
  define_hardware_flags(f)


def define_eval_flags(do_eval_help="Whether to run eval on the dev set.", flag_values=flags.FLAGS):
  flags.DEFINE_bool("do_eval", False, do_eval_help, flag_values=flag_values)
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", flag_values=flag_values)


def define_finetuning_flags(max_seq_length=128, train_batch_size=32, learning_rate=5e-5,
                            do_predict_help="Whether to run the model in inference mode on the "
                                            "test set.",
                            export_help="If set, write a SavedModel here.",
                            flag_values=flags.FLAGS):
  """The flags run_classifier, run_squad and run_swag share."""
  f = flag_values
  define_training_flags(
      max_seq_length,
      "The maximum total input sequence length after WordPiece tokenization. Sequences longer "
      "than this will be truncated, and sequences shorter than this will be padded.",
      train_batch_size, learning_rate, flag_values=f)
  cli.define_tokenizer_flags(f)
  flags.DEFINE_bool("do_predict", False, do_predict_help, flag_values=f)
  flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", flag_values=f)
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.",
                     flag_values=f)
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Proportion of training to perform linear learning rate warmup for. "
                     "E.g., 0.1 = 10% of training.", flag_values=f)
  flags.DEFINE_string("export_dir", None, export_help, flag_values=f)
  precision.define_flag("the --export_dir SavedModel", flag_values=f)
