"""Writes MediaPipe's metadata into a bert_tf .tflite, so MediaPipe Tasks' TextClassifier or
TextEmbedder serves it from raw text (BERT tokenizer, vocab and labels inside the file).

Run by export_litert.py in a Python of its own (`--mediapipe_python`): MediaPipe's metadata
writers ship in mediapipe 0.10.x, which pins protobuf < 5, and TensorFlow 2.21 needs
protobuf >= 6, so the two cannot share one virtualenv. This file imports neither TensorFlow
nor bert_tf, only mediapipe and the standard library.

  python mediapipe_metadata.py --model in.tflite --output out.tflite --vocab vocab.txt \
    --kind classifier --labels labels.txt [--score_threshold T] --ids NAME --mask NAME \
    --segment NAME

A classifier's scores are the model's output as it is (MediaPipe applies no softmax or
sigmoid): a single-label model outputs its softmax, a multi-label one a sigmoid per label.
`--score_threshold` (multi-label) is the metadata's default score threshold: MediaPipe keeps
the categories scoring at or over it.
"""

import argparse
import sys


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", required=True, help="The .tflite without metadata.")
  parser.add_argument("--output", required=True, help="Where to write the .tflite with it.")
  parser.add_argument("--vocab", required=True, help="The WordPiece vocab, one token a line.")
  parser.add_argument("--kind", required=True, choices=("classifier", "embedder"))
  parser.add_argument("--labels", help="classifier: the labels file, one label a line.")
  parser.add_argument("--score_threshold", type=float,
                      help="classifier: the default score threshold (default: none).")
  parser.add_argument("--output_name", default="embedding", help="embedder: the output's name.")
  for name in ("ids", "mask", "segment"):
    parser.add_argument("--" + name, required=True, help="The input tensor's name.")
  args = parser.parse_args(argv)
  try:
    from mediapipe.tasks.python.metadata.metadata_writers import metadata_writer
  except ImportError as e:
    print("error: this Python has no MediaPipe metadata writers (%s); install mediapipe==0.10.21 "
          "in its virtualenv." % e, file=sys.stderr)
    return 2
  with open(args.model, "rb") as f:
    model = bytearray(f.read())
  names = {"ids_name": args.ids, "mask_name": args.mask, "segment_name": args.segment}
  tokenizer = metadata_writer.BertTokenizer(args.vocab)
  if args.kind == "classifier":
    with open(args.labels, encoding="utf-8", newline="") as f:
      labels = f.read().split("\n")[:-1]  # every line ends with one
    # As text_classifier.MetadataWriter.create_for_bert_model, with the threshold.
    writer = metadata_writer.MetadataWriter.create(model)
    writer.add_general_info("TextClassifier", "A bert_tf text classifier.")
    writer.add_bert_text_input(tokenizer, **names)
    thresholding = None
    if args.score_threshold is not None:
      thresholding = metadata_writer.ScoreThresholding(args.score_threshold)
    writer.add_classification_output(metadata_writer.Labels().add(labels),
                                     score_thresholding=thresholding)
  else:
    writer = metadata_writer.MetadataWriter.create(model)
    writer.add_general_info("TextEmbedder", "A bert_tf sentence embedder.")
    writer.add_bert_text_input(tokenizer, **names)
    writer.add_feature_output(name=args.output_name)
  written, _ = writer.populate()
  with open(args.output, "wb") as f:
    f.write(written)
  return 0


if __name__ == "__main__":
  sys.exit(main())
