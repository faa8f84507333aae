"""sentence-transformers, in --st_python: the peer of text_embedder.py on the same folder."""

import json

from benchmarks import sides, timing


def embed(workload_file, model_dir, threads):
  """latency_stats of `SentenceTransformer(model_dir).encode(texts)` on the CPU, torch using
  `threads` threads: single sentences, then batches of 32."""
  import sentence_transformers
  import torch
  torch.set_num_threads(threads)
  with open(workload_file, encoding="utf-8") as f:
    workload = json.load(f)
  model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")
  call = lambda texts: model.encode(texts, batch_size=32, convert_to_numpy=True,
                                    show_progress_bar=False)
  batches = workload["batches"]
  return {"single": timing.latency_stats(
              timing.call_seconds(call, [[t] for t in workload["single"]]), 1),
          "batch32": timing.latency_stats(timing.call_seconds(call, batches), len(batches[0])),
          "version": "sentence-transformers %s, torch %s" % (sentence_transformers.__version__,
                                                             torch.__version__)}


if __name__ == "__main__":
  sides.main({"embed": embed})
