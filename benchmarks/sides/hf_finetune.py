"""Hugging Face transformers fine-tuning a classifier on a JSONL file, in --hf_python: the peer
of benchmarks/own_data.py's run_classifier runs.

BertForSequenceClassification from an HF folder, trained as run_classifier trains (BERT's
recipe): the same number of steps of the same batch size, cut to each batch's longest row
(as DataCollatorWithPadding pads), linear warm-up then linear decay to 0, weight decay on
every weight but biases and LayerNorm, gradients clipped to global norm 1. Standard library at
the top, as every side.
"""

import json
import os

from benchmarks import sides, timing


def read_rows(path, label_column, labels):
  """(texts, targets): targets[i][j] is 1.0 where row i's label list holds labels[j]."""
  texts, targets = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        row = json.loads(line)
        texts.append(row["text"])
        targets.append([1.0 if name in row[label_column] else 0.0 for name in labels])
  return texts, targets


def batch_tensors(encoded, rows, targets=None):
  """The model's inputs for `rows`, padded to their longest (and their float targets)."""
  import torch
  length = max(len(encoded[i]) for i in rows)
  ids = torch.zeros((len(rows), length), dtype=torch.long)
  mask = torch.zeros((len(rows), length), dtype=torch.long)
  for k, i in enumerate(rows):
    ids[k, :len(encoded[i])] = torch.tensor(encoded[i])
    mask[k, :len(encoded[i])] = 1
  inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
  if targets is not None:
    inputs["labels"] = torch.tensor([targets[i] for i in rows])
  return inputs


def multi_label(folder, train_file, test_file, label_column, labels, threads, max_seq_length,
                batch_size, steps, warmup_steps, learning_rate, weight_decay, seed):
  """Trains `steps` steps (epochs of shuffled full batches, as run_classifier's dataset drops
  the remainder) with problem_type multi_label_classification; returns the seconds of the
  training loop (the first step's allocations included, tokenizing and loading not), the
  test rows' sigmoid probabilities in `labels` order, the last loss and the versions."""
  import torch
  import transformers

  from benchmarks.sides import hf
  torch.set_num_threads(threads)
  torch.manual_seed(seed)
  tokenizer = transformers.BertTokenizerFast(os.path.join(folder, "vocab.txt"),
                                             do_lower_case=True)
  train_texts, train_targets = read_rows(train_file, label_column, labels)
  test_texts, _ = read_rows(test_file, label_column, labels)
  encode = lambda texts: tokenizer(texts, truncation=True, max_length=max_seq_length)["input_ids"]
  train_ids, test_ids = encode(train_texts), encode(test_texts)
  model = transformers.BertForSequenceClassification.from_pretrained(
      folder, num_labels=len(labels), problem_type="multi_label_classification").train()
  no_decay = lambda name: "bias" in name or "LayerNorm" in name
  groups = [{"params": [p for n, p in model.named_parameters() if not no_decay(n)],
             "weight_decay": weight_decay},
            {"params": [p for n, p in model.named_parameters() if no_decay(n)],
             "weight_decay": 0.0}]
  optimizer = torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.999), eps=1e-6)
  schedule = transformers.get_linear_schedule_with_warmup(optimizer, warmup_steps, steps)
  generator = torch.Generator().manual_seed(seed)
  batches_per_epoch = len(train_ids) // batch_size

  def train():
    done, loss = 0, None
    while done < steps:
      order = torch.randperm(len(train_ids), generator=generator).tolist()
      for b in range(min(batches_per_epoch, steps - done)):
        inputs = batch_tensors(train_ids, order[b * batch_size:(b + 1) * batch_size],
                               train_targets)
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        done += 1
    return loss.item()

  last_loss, seconds = timing.timed(train)
  model.eval()
  probabilities = []
  with torch.inference_mode():
    for start in range(0, len(test_ids), batch_size):
      inputs = batch_tensors(test_ids, list(range(start, min(start + batch_size, len(test_ids)))))
      probabilities += torch.sigmoid(model(**inputs).logits.float()).tolist()
  return {"seconds": seconds, "probabilities": probabilities, "loss": last_loss,
          "version": hf.versions()}


if __name__ == "__main__":
  sides.main({"multi_label": multi_label})
