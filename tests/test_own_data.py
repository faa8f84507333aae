"""run_classifier on your own file (--train_file/--eval_file/--predict_file): the reader and its
errors, the problem type and label order, class weights, the metrics and the weighted losses
against hand-worked values, and one run of each problem type with its export."""

from functools import partial
import json
import math
import os

import numpy as np
import pytest

from bert_tf.errors import UserInputError
from bert_tf.runner.run_lock import LOCK_NAME
from bert_tf.tasks.own_data import data, metrics, postprocess, weights
from bert_tf.tasks.own_data.data import Columns
from helpers import TINY, VOCAB_UNCASED, run_script, tiny_config

COLUMNS = Columns()


def _write(tmp_path, name, text, encoding="utf-8"):
  path = tmp_path / name
  path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
  return str(path)


def _read(tmp_path, name, text, columns=COLUMNS, needs_label=True):
  return data.read_rows(_write(tmp_path, name, text), columns, "--train_file", needs_label)


def _error(call, *args, **kwargs):
  with pytest.raises(UserInputError) as error:
    call(*args, **kwargs)
  message = str(error.value)
  assert "\n" not in message
  return message


# The reader.

def test_csv_quoted_fields_keep_commas_tabs_and_newlines_and_a_bom_is_dropped(tmp_path):
  rows = _read(tmp_path, "a.csv", '\ufefftext,label\n"one, two\tthree\nfour",x\n\nplain,"y"\n')
  assert [(r.row, r.line, r.text_a, r.label) for r in rows] == [
      (0, 2, "one, two\tthree\nfour", "x"), (1, 5, "plain", "y")]


def test_tsv_pairs_ids_and_jsonl_rows(tmp_path):
  columns = Columns(text="a", text_b="b", label="y", id="key")
  rows = _read(tmp_path, "a.tsv", 'key\ta\tb\ty\nk1\t"x\ty"\tz\t0.5\n', columns)
  assert [(r.id, r.text_a, r.text_b, r.label) for r in rows] == [("k1", "x\ty", "z", "0.5")]
  rows = _read(tmp_path, "a.jsonl", '{"a": "x", "b": "z", "y": [1, "n"], "key": 7}\n\n', columns)
  assert [(r.line, r.id, r.text_b, r.label) for r in rows] == [(1, 7, "z", [1, "n"])]


def test_a_predict_file_may_lack_the_label_column(tmp_path):
  rows = _read(tmp_path, "p.csv", "text\nhello\n", needs_label=False)
  assert rows[0].label is None


@pytest.mark.parametrize("name, text, expected", [
    ("a.csv", "sentence,label\nhi,x\n",
     "a.csv line 1 has no column 'text' (its columns: sentence, label); pass --text_column="),
    ("a.jsonl", '{"text": "hi", "y": 1}\n',
     "a.jsonl line 1 has no key 'label' (its keys: text, y); pass --label_column="),
    ("a.csv", "text,label\n  ,x\n", "a.csv line 2: empty text in 'text'; fill it in"),
    ("a.jsonl", '{"text": "a", "label": "x"}\n{"text": "a", "label": "x"\n',
     "a.jsonl line 2 is not a JSON object ("),
    ("a.jsonl", '["a", "x"]\n', "a.jsonl line 1 is a JSON list, not an object"),
    ("a.csv", "text,label\nhi,x\nhi,there,x\n",
     "a.csv line 3 has 3 fields, the header 2 (text, label); quote a field that holds a comma"),
    ("a.csv", "text,label,text\nhi,x,y\n",
     "a.csv line 1: the column name 'text' appears twice in the header; rename one."),
    ("a.jsonl", '{"text": "a", "label": "x", "text": "b"}\n',
     "a.jsonl line 1: the key 'text' appears twice in the object; rename one."),
    ("a.csv", "", "--train_file="),
    ("a.csv", "text,label\n", "has no rows, only its header"),
    ("a.txt", "text,label\nhi,x\n", "must be .csv, .tsv or .jsonl; rename the file"),
])
def test_bad_files_are_one_line_naming_the_file_line_and_fix(tmp_path, name, text, expected):
  assert expected in _error(_read, tmp_path, name, text)


def test_an_empty_file_says_what_it_needs(tmp_path):
  message = _error(_read, tmp_path, "a.csv", "\n")
  assert message.endswith("a.csv is empty; it needs a first line naming the columns, e.g. "
                          "text,label.")


def test_a_file_that_is_not_utf8_names_the_line(tmp_path):
  path = _write(tmp_path, "a.csv", "text,label\nhi,x\ncaf\u00e9,y\n", encoding="latin-1")
  message = _error(data.read_rows, path, COLUMNS, "--train_file")
  assert message == "Data file %s is not UTF-8 text (bad byte at line 3); save it as UTF-8." % path


def test_a_field_over_the_csv_modules_default_limit_is_text_not_a_quoting_error(tmp_path):
  long_text = "word " * 40000  # 200,000 characters, over csv's 131,072 default
  rows = _read(tmp_path, "a.csv", "text,label\n%s,x\nshort,y\n" % long_text)
  assert [(len(r.text_a), r.label) for r in rows] == [(len(long_text), "x"), (5, "y")]


def test_a_quote_left_open_does_not_swallow_the_rows_after_it(tmp_path):
  # Read loosely, the quote on line 2 would end on line 4 and make lines 2-4 one row.
  text = 'text\tlabel\n"great film\tpos\nbad film\tneg\nok "fine" film\tpos\n'
  message = _error(_read, tmp_path, "a.tsv", text)
  assert message.startswith(str(tmp_path / "a.tsv") + " lines 2-4: '\\t' expected after '\"'")
  assert "fix the quoting" in message
  assert "line 2: " in _error(_read, tmp_path, "b.csv", 'text,label\n"hi" there,x\n')


def test_header_spaces_lines_of_spaces_and_crlf_are_read_as_meant(tmp_path):
  rows = _read(tmp_path, "a.csv", "text , label\r\nhi, a\r\n  \r\n\r\n")
  assert [(r.text_a, r.label) for r in rows] == [("hi", " a")]
  assert "appears twice" in _error(_read, tmp_path, "b.csv", "text,text \nhi,x\n")


def test_the_id_column_is_needed_only_in_the_predict_file(tmp_path):
  columns = Columns(id="key")
  assert _read(tmp_path, "t.csv", "text,label\nhi,x\n", columns)[0].id is None
  assert _read(tmp_path, "p.csv", "key,text\nk1,hi\n", columns, needs_label=False)[0].id == "k1"
  assert "has no column 'key'" in _error(_read, tmp_path, "q.csv", "text\nhi\n", columns,
                                         needs_label=False)


def test_one_column_named_by_two_flags_is_refused():
  assert data.check_distinct_columns(Columns(text="a", text_b="b", label="c", id="a")) is None
  assert _error(data.check_distinct_columns, Columns(text="t", label="t")) == (
      "--label_column=t names the column --text_column names too; each of --text_column, "
      "--text_b_column and --label_column names its own column.")
  assert "--text_b_column=t names the column --text_column" in _error(
      data.check_distinct_columns, Columns(text="t", text_b="t"))


# Labels: problem type, values, order.

def _labeled(values):
  return [data.Row(i, i + 2, "t", None, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("values, expected, why", [
    (["pos", "neg", "pos"], "single_label", "the labels are names"),
    (["1", "0", "2"], "single_label", "whole number"),
    ([1, 0], "single_label", "whole number"),
    (["0.5", "3", "1"], "regression", "line 2's (0.5) has a fraction"),
    ([2.5, 1], "regression", "has a fraction"),
    (["a|b", "c", ""], "multi_label", "line 2's label 'a|b' holds --label_delimiter=|"),
    ([["a"], []], "multi_label", "JSON lists (line 2)"),
])
def test_the_problem_type_is_read_from_the_labels_and_says_why(values, expected, why):
  problem_type, reason = data.infer_problem_type("f", _labeled(values), "|")
  assert problem_type == expected and why in reason


def test_scores_with_a_gap_are_not_read_as_a_label_per_score():
  assert _error(data.infer_problem_type, "f.csv", _labeled(["0.5", "4", "NA"]), "|") == (
      "f.csv line 4: the label \"NA\" is not a number, but line 2's (0.5) has a fraction, as a "
      "regression's scores do; fix line 4 or remove it, or pass --problem_type=single_label if "
      "the labels are names.")
  assert "line 2: the label NaN is not a number, but line 3's (1.5)" in _error(
      data.infer_problem_type, "f.jsonl", _labeled([float("nan"), 1.5]), "|")
  assert data.infer_problem_type("f", _labeled(["4", "NA"]), "|")[0] == "single_label"


def test_mixed_label_types_name_both_lines():
  message = _error(data.infer_problem_type, "f.jsonl", _labeled([["a"], "b"]), "|")
  assert message.startswith("f.jsonl line 3: the label \"b\" is a text, but line 2's ([\"a\"]) is "
                            "a list;")
  assert "line 3: the label 1 is a number" in _error(
      data.infer_problem_type, "f.jsonl", _labeled(["a", 1]), "|")


def test_label_values_of_each_problem_type():
  rows = _labeled(["a| b|a", "", ["c", 2]])
  assert [r.label for r in data.with_labels("f", rows, "multi_label", "|")] == [
      ("a", "b"), (), ("c", "2")]
  assert [r.label for r in data.with_labels("f", _labeled([1, " x ", True]), "single_label",
                                            "|")] == ["1", "x", "true"]
  assert [r.label for r in data.with_labels("f", _labeled(["1.5", 2]), "regression", "|")] == [
      1.5, 2.0]


@pytest.mark.parametrize("value, problem_type, expected", [
    ("", "single_label", "f line 2: empty label; fill it in or remove the row"),
    (None, "regression", "f line 2: empty label"),
    ("high", "regression", "f line 2: the label \"high\" is not a number"),
    (["a"], "single_label", "pass --problem_type=multi_label"),
    ({"a": 1}, "single_label", "the label {\"a\": 1} is a JSON object; write a name"),
    ("a\nb", "single_label", "f line 2: the label \"a\\nb\" holds a line break"),
    (["x", "a\r\nb"], "multi_label", "f line 2: the label \"a\\r\\nb\" holds a line break"),
    (float("nan"), "regression", "the label NaN is not a number"),
])
def test_bad_label_values(value, problem_type, expected):
  assert expected in _error(data.with_labels, "f", _labeled([value]), problem_type, "|")


def test_label_order_is_given_or_sorted_numbers_as_numbers():
  assert data.label_order(["b", "a", "c"]) == ["a", "b", "c"]
  assert data.label_order(["10", "2", "1"]) == ["1", "2", "10"]
  assert data.label_order(["b", "a"], ["b", "a"]) == ["b", "a"]
  assert "distinct" in _error(data.from_flag, ["a", "a"])


def test_one_number_written_two_ways_is_refused_and_case_variants_are_named():
  from bert_tf.tasks.own_data import labels
  assert "the labels '1' (line 2) and '1.0' (line 4) are one number written two ways" in _error(
      labels.from_training, "f.jsonl", _labeled([1, 0, 1.0]), None, None, "|", "none")
  assert "'1' (line 2) and '01' (line 3)" in _error(
      labels.from_training, "f", _labeled(["1", "01|0"]), None, None, "|", "none")
  rows = data.with_labels("f", _labeled(["Pos", "neg", "pos", "NEG", "very  good",
                                         "very good ", "caf\u00e9", "cafe\u0301"]),
                          "single_label", "|")
  assert data.check_name_clashes("f", rows, "single_label") == (
      "'Pos' (line 2) and 'pos' (line 4), 'neg' (line 3) and 'NEG' (line 5), "
      "'very  good' (line 6) and 'very good' (line 7), 'caf\u00e9' (line 8) and "
      "'cafe\u0301' (line 9)")
  assert data.check_name_clashes("f", rows[:2], "single_label") is None


def test_labels_outside_the_run_are_listed_or_an_error_under_labels():
  rows = data.with_labels("f", _labeled(["a|z", "y", "a"]), "multi_label", "|")
  assert data.unknown_labels("f", rows, "multi_label", ["a"]) == "'z' (line 2), 'y' (line 3)"
  assert data.unknown_labels("f", rows[2:], "multi_label", ["a"]) is None
  assert _error(data.unknown_labels, "f", rows, "multi_label", ["a"], given=True) == (
      "f names labels not in --labels=a: 'z' (line 2), 'y' (line 3); add them there, or fix "
      "the rows.")


# Class weights.

def test_balanced_class_weights_hand_worked():
  single = data.with_labels("f", _labeled(["a", "a", "a", "b"]), "single_label", "|")
  # 4 rows / (3 labels * the label's rows): a 4/9, b 4/3; c has no row.
  balanced = weights.class_weights("balanced", "single_label", ["a", "b", "c"], single)
  assert balanced == pytest.approx([4 / 9, 4 / 3, 1.0])
  multi = data.with_labels("f", _labeled(["a|b", "a", "", "b"]), "multi_label", "|")
  # negatives / positives: a 2/2, b 2/2; c never positive.
  assert weights.class_weights("balanced", "multi_label", ["a", "b", "c"], multi) == [1, 1, 1]
  everywhere = data.with_labels("f", _labeled(["a|b", "a", "a"]), "multi_label", "|")
  # a on every row: no negatives, 1.0 (not 0, which would zero its loss); b 2/1.
  assert weights.class_weights("balanced", "multi_label", ["a", "b"], everywhere) == [1.0, 2.0]
  assert weights.class_weights("1,2.5", "single_label", ["a", "b"], single) == [1.0, 2.5]
  assert weights.class_weights("none", "single_label", ["a", "b"], single) is None
  for spec in ("1,0", "inf,1", "1e400,1", "nan,1"):
    assert "2 positive finite numbers, one per label in the order a,b" in _error(
        weights.class_weights, spec, "single_label", ["a", "b"], single)
  assert "this run is a regression" in _error(weights.class_weights, "balanced", "regression",
                                              None, single)


# Metrics, hand-worked.

def test_single_label_metrics_hand_worked():
  # gold a a b c(-1: unknown); predicted a b b a.
  result = metrics.single_label_metrics([0, 1, 1, 0], [0, 0, 1, -1], ["a", "b", "c"])
  assert result["eval_accuracy"] == 0.5
  # a: tp 1 fp 1 fn 1 -> P 1/2 R 1/2 F1 1/2; b: tp 1 fp 1 fn 0 -> P 1/2 R 1 F1 2/3; c: absent.
  assert result["eval_precision_a"] == 0.5 and result["eval_recall_a"] == 0.5
  assert result["eval_f1_b"] == pytest.approx(2 / 3) and result["eval_recall_b"] == 1.0
  assert result["eval_f1_c"] == 0.0
  assert result["eval_macro_f1"] == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_multi_label_metrics_hand_worked():
  probabilities = [[0.9, 0.2, 0.6], [0.4, 0.7, 0.1], [0.1, 0.1, 0.1]]
  gold = [[1, 0, 0], [1, 1, 0], [0, 0, 0]]
  result = metrics.multi_label_metrics(probabilities, gold, ["a", "b", "c"], 0.5)
  # predicted: {a, c}, {b}, {}: exact on row 3 only.
  assert result["eval_exact_match"] == pytest.approx(1 / 3)
  # a: tp 1 fn 1 -> F1 2/3; b: tp 1 -> 1; c: fp 1 -> 0. micro: tp 2 fp 1 fn 1 -> 2/3.
  assert result["eval_f1_a"] == pytest.approx(2 / 3) and result["eval_f1_b"] == 1.0
  assert result["eval_precision_c"] == 0.0
  assert result["eval_macro_f1"] == pytest.approx((2 / 3 + 1) / 3)
  assert result["eval_micro_f1"] == pytest.approx(2 / 3)
  assert metrics.multi_label_metrics(probabilities, gold, ["a", "b", "c"], 0.05)[
      "eval_micro_f1"] == pytest.approx(2 * 3 / (2 * 3 + 6 + 0))


def test_multi_label_gold_labels_the_model_does_not_know_are_missed():
  # Row 1's gold is {a, z}, z unknown: predicting {a} is no exact match, and z is a false
  # negative of the micro-F1 (tp 2 fp 0 fn 1 -> 4/5), not dropped (which would give 1 and 1).
  probabilities = [[0.9, 0.1], [0.1, 0.8]]
  result = metrics.multi_label_metrics(probabilities, [[1, 0], [0, 1]], ["a", "b"], 0.5,
                                       missed=[1, 0])
  assert result["eval_exact_match"] == 0.5
  assert result["eval_micro_f1"] == pytest.approx(4 / 5)
  assert result["eval_f1_a"] == 1.0 and result["eval_macro_f1"] == 1.0


def test_regression_metrics_hand_worked():
  result = metrics.regression_metrics([1.0, 2.0, 4.0], [1.0, 3.0, 2.0])
  assert result["eval_mse"] == pytest.approx((0 + 1 + 4) / 3)
  # x - mean: -4/3, -1/3, 5/3; y - mean: -1, 1, 0 -> cov 1, |x| sqrt(42/9), |y| sqrt(2).
  assert result["eval_pearson"] == pytest.approx(1 / math.sqrt(42 / 9 * 2))
  assert result["eval_spearman"] == pytest.approx(0.5)  # ranks 1 2 3 vs 1 3 2


def test_prediction_lines_of_each_problem_type(tmp_path):
  assert postprocess.prediction("single_label", ["a", "b"], [0.3, 0.7], 0.5) == {
      "label": "b", "probabilities": {"a": 0.3, "b": 0.7}}
  assert postprocess.prediction("multi_label", ["a", "b"], [0.6, 0.5], 0.5)["labels"] == ["a"]
  assert postprocess.prediction("regression", None, 1.5, 0.5) == {"prediction": 1.5}
  path = str(tmp_path / "predictions.jsonl")
  postprocess.write_predictions(path, [data.Row(4, 6, "t", None, None, id="k")], "single_label",
                                ["a", "b"], [[0.75, 0.25]], 0.5, True)
  assert [json.loads(line) for line in open(path)] == [
      {"row": 4, "id": "k", "label": "a", "probabilities": {"a": 0.75, "b": 0.25}}]


# The weighted losses, hand-worked.

def test_weighted_softmax_cross_entropy_hand_worked():
  from bert_tf.tasks.own_data import model
  logits = np.array([[0.0, math.log(3.0)], [0.0, 0.0]], np.float32)
  loss = np.asarray(model.weighted_softmax_cross_entropy(logits, np.array([[0], [1]]),
                                                         [2.0, 0.5]))
  # softmax row 1: (1/4, 3/4), label 0: -log(1/4) * 2; row 2: -log(1/2) * 0.5.
  np.testing.assert_allclose(loss, [2 * math.log(4), 0.5 * math.log(2)], rtol=1e-6)


def test_weighted_sigmoid_cross_entropy_hand_worked():
  from bert_tf.tasks.own_data import model
  logits = np.array([[0.0, math.log(3.0)]], np.float32)  # sigmoid 1/2, 3/4
  loss = np.asarray(model.weighted_sigmoid_cross_entropy(logits, np.array([[1.0, 0.0]]),
                                                         [3.0, 2.0]))
  # label 1 positive: -3 * log(1/2); label 2 negative (its weight unused): -log(1/4); mean.
  np.testing.assert_allclose(loss, [(3 * math.log(2) + math.log(4)) / 2], rtol=1e-6)
  plain = np.asarray(model.weighted_sigmoid_cross_entropy(logits, np.array([[1.0, 0.0]])))
  np.testing.assert_allclose(plain, [(math.log(2) + math.log(4)) / 2], rtol=1e-6)


# One run of each problem type: every action and the export, in one session.

SINGLE = "id,text,label\n" + "".join(
    "r%d,%s,%s\n" % (i, text, label) for i, (text, label) in enumerate(
        [("a great film", "good"), ("a dull film", "bad"), ("\"fine, really\"", "good"),
         ("awful food", "bad"), ("the room is blue", "meh"), ("lovely staff", "good")]))
MULTI = "".join(json.dumps({"text": t, "label": l}) + "\n" for t, l in [
    ("the team won", ["sport"]), ("rates rose", ["money"]), ("the club's shares fell",
                                                             ["sport", "money"]),
    ("a quiet day", []), ("a new stadium loan", ["money", "sport"])])
REGRESSION = "a\tb\tscore\n" + "".join("%s\t%s\t%s\n" % row for row in [
    ("a man plays", "a man plays music", 4.5), ("a cat", "a car", 0.5),
    ("it rains", "it is wet", 3.25), ("a dog runs", "a dog sleeps", 1.5)])


def _common(tmp_path, name, data_file, *extra):
  return ["--train_file=" + data_file, "--eval_file=" + data_file, "--predict_file=" + data_file,
          "--vocab_file=" + VOCAB_UNCASED, "--bert_config_file=" + TINY.config,
          "--init_checkpoint=" + TINY.ckpt, "--max_seq_length=16", "--train_batch_size=8",
          "--num_train_epochs=1", "--do_train", "--do_eval", "--do_predict",
          "--output_dir=%s" % (tmp_path / name), "--export_dir=%s" % (tmp_path / (name + "_x")),
          *extra]


def _results(path):
  return dict(line.split(" = ") for line in open(path).read().splitlines())


def _predictions(path):
  return [json.loads(line) for line in open(path, encoding="utf-8")]


def _answer(export_dir, *texts):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
  signature = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
  names = ("text_a", "text_b")[:len(texts)]
  return {k: v.numpy() for k, v in signature(**{
      n: tf.constant(t) for n, t in zip(names, texts)}).items()}


@pytest.mark.slow
def test_each_problem_type_trains_predicts_names_and_exports_the_same_answers(
    tmp_path, script_session):
  run = partial(run_script, "run_classifier.py", shared=script_session)
  single = _write(tmp_path, "single.csv", SINGLE)
  done = run(*_common(tmp_path, "single", single, "--id_column=id", "--labels=good,meh,bad",
                      "--class_weights=balanced"))
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Problem type: single_label (the labels are names)" in done.stderr
  assert "Class weights (--class_weights=balanced): good=0.6667, meh=2, bad=1" in done.stderr
  out = tmp_path / "single"
  assert json.load(open(out / "classifier_labels.json"))["labels"] == ["good", "meh", "bad"]
  results = _results(out / "eval_results.txt")
  assert {"eval_accuracy", "eval_macro_f1", "eval_f1_meh", "eval_precision_bad",
          "eval_recall_good"} <= set(results)
  lines = _predictions(out / "predictions.jsonl")
  assert [(p["row"], p["id"]) for p in lines] == [(i, "r%d" % i) for i in range(6)]
  assert all(list(p["probabilities"]) == ["good", "meh", "bad"] for p in lines)
  assert all(p["label"] == max(p["probabilities"], key=p["probabilities"].get) for p in lines)
  answer = _answer(tmp_path / "single_x", ["a great film", "awful food"])
  expected = [[lines[i]["probabilities"][n] for n in ("good", "meh", "bad")] for i in (0, 3)]
  np.testing.assert_allclose(answer["probabilities"], expected, atol=1e-5)
  assert [x.decode() for x in answer["labels"]] == [lines[0]["label"], lines[3]["label"]]

  record = json.load(open(out / "classifier_labels.json"))
  assert record["correct_class_weights"] is True  # the default when training with weights
  # Without the correction the same model leans toward the up-weighted label: its
  # probabilities are the corrected ones times the weights, renormalised.
  raw = run("--predict_file=" + single, "--vocab_file=" + VOCAB_UNCASED,
            "--bert_config_file=" + TINY.config, "--max_seq_length=16", "--do_predict",
            "--output_dir=%s" % out, "--id_column=id", "--nocorrect_class_weights")
  assert raw.returncode == 0, raw.stderr[-3000:]
  assert ("Class weights kept in the probabilities at evaluation, prediction and export "
          "(--correct_class_weights)") in raw.stderr
  assert "correct_class_weights changed from true to false" in raw.stderr
  w = np.array(record["class_weights"])
  corrected = np.array([list(p["probabilities"].values()) for p in lines])
  leaning = (corrected * w) / (corrected * w).sum(-1, keepdims=True)
  np.testing.assert_allclose([list(p["probabilities"].values()) for p in _predictions(
      out / "predictions.jsonl")], leaning, rtol=1e-4, atol=1e-6)

  # Predicting again from the run reads its label order, not the file's sorted one.
  os.remove(out / "predictions.jsonl")
  again = run("--predict_file=" + single, "--vocab_file=" + VOCAB_UNCASED,
              "--bert_config_file=" + TINY.config, "--max_seq_length=16", "--do_predict",
              "--output_dir=%s" % out, "--id_column=id")
  assert again.returncode == 0, again.stderr[-3000:]
  assert _predictions(out / "predictions.jsonl") == lines

  multi = _write(tmp_path, "multi.jsonl", MULTI)
  done = run(*_common(tmp_path, "multi", multi, "--threshold=0.5"))
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Problem type: multi_label (the labels are JSON lists (line 1))" in done.stderr
  results = _results(tmp_path / "multi" / "eval_results.txt")
  assert {"eval_micro_f1", "eval_macro_f1", "eval_exact_match", "eval_f1_sport"} <= set(results)
  lines = _predictions(tmp_path / "multi" / "predictions.jsonl")
  assert all(list(p["probabilities"]) == ["money", "sport"] for p in lines)
  assert all(p["labels"] == [n for n, v in p["probabilities"].items() if v > 0.5] for p in lines)
  answer = _answer(tmp_path / "multi_x", ["the team won", "a quiet day"])
  np.testing.assert_allclose(answer["probabilities"], [
      list(lines[i]["probabilities"].values()) for i in (0, 3)], atol=1e-5)
  assert [[x.decode() for x in row if x] for row in answer["labels"]] == [
      lines[0]["labels"], lines[3]["labels"]]

  # Another --threshold on a re-run replaces the export: it names labels over the new one.
  again = run(*_common(tmp_path, "multi", multi, "--threshold=0.9"))
  assert again.returncode == 0, again.stderr[-3000:]
  assert "threshold was 0.5, now 0.9" in again.stderr
  answer = _answer(tmp_path / "multi_x", ["the team won"])
  assert [x.decode() for x in answer["labels"][0] if x] == [
      n for n, v in lines[0]["probabilities"].items() if v > 0.9]
  # Predicting again without --threshold applies the training run's 0.9, as the export does
  # (not the default 0.5, which names labels here).
  assert any(p["labels"] for p in lines)
  again = run("--predict_file=" + multi, "--vocab_file=" + VOCAB_UNCASED,
              "--bert_config_file=" + TINY.config, "--max_seq_length=16", "--do_predict",
              "--output_dir=%s" % (tmp_path / "multi"))
  assert again.returncode == 0, again.stderr[-3000:]
  assert "trained with --threshold=0.9" in again.stderr
  assert [p["labels"] for p in _predictions(tmp_path / "multi" / "predictions.jsonl")] == [
      [n for n, v in p["probabilities"].items() if v > 0.9] for p in lines]

  # Converted to Hugging Face, the head keeps its names and reads through sigmoids.
  from bert_tf.checkpoints import conversion
  conversion.convert_to_hf(str(tmp_path / "multi" / "model.ckpt-1"), str(tmp_path / "multi_hf"))
  hf_config = json.load(open(tmp_path / "multi_hf" / "config.json"))
  assert hf_config["id2label"] == {"0": "money", "1": "sport"}
  assert hf_config["problem_type"] == "multi_label_classification"

  regression = _write(tmp_path, "pairs.tsv", REGRESSION)
  done = run(*_common(tmp_path, "regression", regression, "--text_column=a",
                      "--text_b_column=b", "--label_column=score"))
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Problem type: regression" in done.stderr
  results = _results(tmp_path / "regression" / "eval_results.txt")
  assert {"eval_pearson", "eval_spearman", "eval_mse"} <= set(results)
  lines = _predictions(tmp_path / "regression" / "predictions.jsonl")
  assert [sorted(p) for p in lines] == [["prediction", "row"]] * 4
  answer = _answer(tmp_path / "regression_x", ["a cat", "it rains"], ["a car", "it is wet"])
  np.testing.assert_allclose(answer["predictions"], [lines[1]["prediction"],
                                                     lines[2]["prediction"]], atol=1e-5)

  # Bad input: one line, exit 2, before any training.
  both = run(*_common(tmp_path, "both", single), "--task_name=MRPC")
  assert both.returncode == 2 and "pass one or the other" in both.stderr
  glue = run("--task_name=MRPC", "--data_dir=%s" % tmp_path, "--text_column=a",
             "--vocab_file=" + VOCAB_UNCASED, "--bert_config_file=" + TINY.config,
             "--output_dir=%s" % (tmp_path / "glue"), "--do_train")
  assert glue.returncode == 2 and "--text_column is for your own files" in glue.stderr
  bad = _write(tmp_path, "bad.csv", "text,label\nhi,x\nho\n")
  broken = run(*_common(tmp_path, "broken", bad))
  assert broken.returncode == 2
  assert "bad.csv line 3 has 1 fields, the header 2" in broken.stderr
  assert not (tmp_path / "broken" / "train.tf_record").exists()


def test_a_run_that_does_not_train_reads_the_recorded_labels(tmp_path):
  from bert_tf.tasks.own_data import labels
  out, glue_run = tmp_path / "out", tmp_path / "glue"
  (glue_run / "training_state").mkdir(parents=True)
  out.mkdir()
  (glue_run / "training_state" / "settings.json").write_text(json.dumps(
      {"task_name": "mrpc", "labels": ["0", "1"]}))
  schema = labels.from_trained(str(out), str(glue_run / "model.ckpt-3"), None, None)
  assert schema == labels.Schema("single_label", ["0", "1"], text_pair=True)  # MRPC: pairs
  assert "The model was trained on text pairs" in _error(
      labels.from_trained, str(out), str(glue_run / "model.ckpt-3"), None, None, False)
  labels.write(str(out), labels.Schema("multi_label", ["b", "a"], [2.0, 1.0]), threshold=0.75)
  assert labels.from_trained(str(out), None, None, ["a", "b"]) == labels.Schema(
      "multi_label", ["b", "a"], [2.0, 1.0], threshold=0.75, correct_weights=False)
  _state(out, labels.Schema("multi_label", ["b", "a"], [2.0, 1.0]).record())
  # From --init_checkpoint elsewhere: the state's settings, and the threshold beside them.
  assert labels.from_trained(str(tmp_path / "new"), str(out / "model.ckpt-1"), None, None) == (
      labels.Schema("multi_label", ["b", "a"], [2.0, 1.0], threshold=0.75, correct_weights=False))
  assert "--problem_type=regression, but the model was trained as multi_label" in _error(
      labels.from_trained, str(out), None, "regression", None)
  assert "--labels=a,c are not the labels the model was trained on (b,a" in _error(
      labels.from_trained, str(out), None, None, ["a", "c"])
  assert "train first (--do_train), or pass --labels and --problem_type" in _error(
      labels.from_trained, str(tmp_path / "none"), None, None, ["a"])
  assert "--problem_type=regression has none: drop one of the flags." in _error(
      labels.from_trained, str(tmp_path / "none"), None, "regression", ["a", "b"])


def _state(folder, settings):
  """A training state in `folder` as has_training_state finds it, with `settings`."""
  state = folder / "training_state"
  state.mkdir(parents=True)
  (state / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
  (state / "ckpt-1.index").write_bytes(b"")
  (state / "settings.json").write_text(json.dumps(settings))


def test_the_training_state_in_output_dir_tells_the_labels_or_that_it_is_glue(tmp_path):
  from bert_tf.tasks.own_data import labels
  own, glue_run = tmp_path / "own", tmp_path / "glue"
  # classifier_labels.json lost: the state's settings still give the order, not --labels'.
  _state(own, {"problem_type": "single_label", "labels": ["good", "bad"]})
  assert labels.from_trained(str(own), None, None, ["bad", "good"]).labels == ["good", "bad"]
  _state(glue_run, {"task_name": "mrpc", "labels": ["0", "1"]})
  assert _error(labels.from_trained, str(glue_run), None, "single_label", ["1", "0"]) == (
      "--output_dir=%s holds the training state of a --task_name=mrpc run (%s), not of one on "
      "your own file: predict from it into another --output_dir, with "
      "--init_checkpoint=<its model.ckpt-N>." % (
          glue_run, glue_run / "training_state" / "settings.json"))


def test_a_hugging_face_classifier_tells_its_problem_type_and_labels(tmp_path):
  from bert_tf.tasks.own_data import labels
  hf, out = tmp_path / "hf", str(tmp_path / "out")
  hf.mkdir()

  def config(**fields):
    (hf / "config.json").write_text(json.dumps(fields))

  config(problem_type="single_label_classification", id2label={"0": "bad", "1": "good"})
  assert labels.from_trained(out, str(hf), None, ["good", "bad"]) == labels.Schema(
      "single_label", ["bad", "good"])
  assert "--problem_type=multi_label, but the model was trained as single_label (recorded in " \
      "%s)" % (hf / "config.json") in _error(labels.from_trained, out, str(hf), "multi_label",
                                              None)
  config(problem_type="regression", id2label={"0": "LABEL_0"})
  assert labels.from_trained(out, str(hf), None, None) == labels.Schema("regression", None)
  assert _error(labels.from_trained, out, str(hf), None, ["a", "b"]) == (
      "--labels=a,b, but the model is a regression (recorded in %s): it has no labels; drop "
      "the flag." % (hf / "config.json"))
  config(id2label={"0": "LABEL_0", "1": "LABEL_1"})  # nothing said: the flags are needed
  assert labels.from_trained(out, str(hf), "multi_label", ["a", "b"]) == labels.Schema(
      "multi_label", ["a", "b"])


def test_a_pair_model_is_not_read_with_one_text_nor_the_other_way(tmp_path):
  from bert_tf.tasks.own_data import labels
  out = str(tmp_path)
  labels.write(out, labels.Schema("single_label", ["a", "b"], text_pair=True))
  assert labels.from_trained(out, None, None, None, True).text_pair is True
  assert _error(labels.from_trained, out, None, None, None, False) == (
      "The model was trained on text pairs (recorded in %s), and this run reads one text a "
      "row: pass --text_b_column=<the column of the second text>." %
      os.path.join(out, labels.LABELS_FILE))
  labels.write(out, labels.Schema("single_label", ["a", "b"], text_pair=False))
  assert "trained on one text a row (recorded in" in _error(
      labels.from_trained, out, None, None, None, True)
  labels.write(out, labels.Schema("single_label", ["a", "b"]))  # not recorded: not compared
  assert labels.from_trained(out, None, None, None, True).labels == ["a", "b"]


def test_training_labels_order_and_refusals():
  from bert_tf.tasks.own_data import labels
  rows = _labeled(["b", "a|c", ""])
  schema = labels.from_training("f", rows, None, None, "|", "none")
  assert schema == labels.Schema("multi_label", ["a", "b", "c"])
  assert labels.from_training("f", rows, None, ["c", "b", "a"], "|", "none").labels == [
      "c", "b", "a"]
  assert "f names labels not in --labels=a,b: 'c' (line 3)" in _error(
      labels.from_training, "f", rows, None, ["a", "b"], "|", "none")
  assert "trains a regression (every label is a number" in _error(
      labels.from_training, "f", _labeled(["0.5", "1"]), None, ["a"], "|", "none")
  assert "a single_label run needs at least two" in _error(
      labels.from_training, "f", _labeled(["a", "a"]), None, None, "|", "none")


def test_the_model_losses_use_the_weights_and_survive_its_config():
  from bert_tf.config import BertConfig
  from bert_tf.tasks.own_data import model
  config = BertConfig.from_json_file(TINY.config)
  single = model.OwnDataModel(config, num_labels=2, class_weights=[2.0, 0.5])
  again = model.OwnDataModel.from_config(single.get_config())
  assert (again.problem_type, again.class_weights, again.regression) == (
      "single_label", [2.0, 0.5], False)
  logits = np.array([[0.0, math.log(3.0)], [0.0, 0.0]], np.float32)
  losses = again.per_example_losses(logits, {"label_ids": np.array([[0], [1]])})
  np.testing.assert_allclose(losses["classification"], [2 * math.log(4), 0.5 * math.log(2)],
                             rtol=1e-6)
  multi = model.OwnDataModel(config, num_labels=2, problem_type="multi_label",
                             class_weights=[3.0, 2.0])
  losses = multi.per_example_losses(logits[:1], {"label_ids": np.array([[1.0, 0.0]])})
  np.testing.assert_allclose(losses["classification"], [(3 * math.log(2) + math.log(4)) / 2],
                             rtol=1e-6)
  regression = model.OwnDataModel(config, num_labels=1, problem_type="regression")
  losses = regression.per_example_losses(np.array([[1.5]], np.float32),
                                         {"label_ids": np.array([[0.5]])})
  np.testing.assert_allclose(losses["classification"], [1.0])


def _tiny_model(**kwargs):
  from bert_tf.tasks.own_data import model
  return model.OwnDataModel(tiny_config(), **kwargs)


def _uncorrected_logits(model, features):
  """The logits of `model`'s weights without the correction (what training computes, less its
  dropout)."""
  model.correct_class_weights = False
  try:
    return np.asarray(model(features, training=False))
  finally:
    model.correct_class_weights = True


def _features(rows=2, seq=6):
  ids = np.arange(100, 100 + rows * seq, dtype=np.int32).reshape(rows, seq)
  return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
          "input_type_ids": np.zeros_like(ids)}


def test_corrected_class_weights_give_the_data_shares_at_inference_only():
  """Trained with weights w, a model's odds are the data's times w; corrected inference divides
  them back: single_label p_j / w_j renormalised, multi_label each label's odds / w_j. Training
  logits stay the weighted model's (training=True is never shifted: own_data/model.py), and
  the setting survives the model's config."""
  w = [4.0, 0.5, 1.0]
  single = _tiny_model(num_labels=3, class_weights=w, correct_class_weights=True)
  features = _features()
  corrected = np.asarray(single(features, training=False))
  raw = _uncorrected_logits(single, features)
  p = np.exp(raw) / np.exp(raw).sum(-1, keepdims=True)
  expected = (p / w) / (p / w).sum(-1, keepdims=True)
  got = np.exp(corrected) / np.exp(corrected).sum(-1, keepdims=True)
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  again = type(single).from_config(single.get_config())
  assert again.correct_class_weights and again.logit_shift == pytest.approx(
      [-math.log(4), math.log(2), 0.0])
  plain = _tiny_model(num_labels=3, class_weights=w)
  assert plain.logit_shift is None and "correct_class_weights" not in plain.get_config()

  multi = _tiny_model(num_labels=2, problem_type="multi_label", class_weights=[3.0, 1.0],
                      correct_class_weights=True)
  corrected = np.asarray(multi(features, training=False))
  raw = _uncorrected_logits(multi, features)
  np.testing.assert_allclose(np.exp(corrected), np.exp(raw) / [3.0, 1.0], rtol=1e-5)

  # Training sees the weighted model's logits: with every dropout off, training=True gives the
  # uncorrected ones.
  import dataclasses
  config = dataclasses.replace(multi.config, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0)
  quiet = type(multi).from_config(dict(multi.get_config(), config=config.to_dict()))
  quiet(features, training=False)
  quiet.set_weights(multi.get_weights())
  quiet.classifier.dropout.rate = 0.0
  np.testing.assert_allclose(np.asarray(quiet(features, training=True)), raw, rtol=1e-5,
                             atol=1e-6)


def test_corrected_eval_loss_is_the_unweighted_one():
  logits = np.array([[0.0, math.log(3.0)]], np.float32)
  labels = {"label_ids": np.array([[0]])}
  for correct, expected in ((True, math.log(4)), (False, 2 * math.log(4))):
    net = _tiny_model(num_labels=2, class_weights=[2.0, 0.5], correct_class_weights=correct)
    losses = net.eval_losses(logits, labels)
    np.testing.assert_allclose(losses["classification"], [expected], rtol=1e-6)


def test_the_correction_is_recorded_with_the_weights_and_old_records_read_uncorrected():
  from bert_tf.tasks.own_data import labels
  weighted = labels.Schema("single_label", ["a", "b"], [2.0, 0.5], correct_weights=True)
  assert weighted.record()["correct_class_weights"] is True
  assert "correct_class_weights" not in labels.Schema("single_label", ["a", "b"]).record()
  assert labels._schema(weighted.record()).correct_weights is True
  before = {"problem_type": "single_label", "labels": ["a", "b"], "class_weights": [2.0, 0.5]}
  assert labels._schema(before).correct_weights is False  # recorded before it existed
  with pytest.raises(ValueError, match="'false' is not true or false"):  # a hand-edited file
    labels._schema(dict(before, correct_class_weights="false"))


def test_the_training_file_is_read_once(tmp_path, monkeypatch):
  from bert_tf.runner import RunOptions
  path = _write(tmp_path, "t.csv", "text,label\na b,x\nc,y\n")
  reads = []
  real = data.read_rows
  monkeypatch.setattr(data, "read_rows", lambda p, *a: reads.append(p) or real(p, *a))
  options = RunOptions(max_seq_length=8, do_train=True, do_eval=True,
                       output_dir=str(tmp_path / "out"))
  hooks = _own_hooks(options, train_file=path, eval_file=path, long_document="truncate")
  train = hooks.read_examples(None, "train")
  assert [r.label for r in train] == ["x", "y"] and reads == [path]
  hooks.read_examples(None, "eval")  # another split is its own read
  assert reads == [path, path]


def test_correct_class_weights_without_weights_says_it_does_nothing(tmp_path, caplog):
  import logging

  from bert_tf.runner import RunOptions
  caplog.set_level(logging.WARNING, logger="absl")
  path = _write(tmp_path, "s.csv", "text,label\na b,x\nc,y\n")
  options = RunOptions(max_seq_length=8, do_train=True, output_dir=str(tmp_path / "out"))
  hooks = _own_hooks(options, train_file=path, long_document="truncate",
                     correct_class_weights=False)
  assert hooks.schema().correct_weights is None
  assert "--correct_class_weights does nothing here: this run trains without --class_weights" \
      in caplog.text
  caplog.clear()
  weighted = _own_hooks(options, train_file=path, long_document="truncate", class_weights="2,1",
                        correct_class_weights=False)
  assert weighted.schema().correct_weights is False and "does nothing" not in caplog.text


def test_hugging_face_conversion_folds_the_correction_into_the_bias():
  import collections

  from bert_tf.checkpoints import hf_files
  state = collections.OrderedDict(
      [("bert.pooler.dense.bias", np.zeros(2, np.float32)),
       ("classifier.bias", np.array([0.5, -1.0], np.float32))])
  recorded = {"class_weights": [4.0, 0.5], "correct_class_weights": True}
  folded = hf_files.with_class_weights_corrected(state, recorded)
  np.testing.assert_allclose(folded["classifier.bias"], [0.5 - math.log(4), -1.0 + math.log(2)],
                             rtol=1e-6)
  assert folded["classifier.bias"].dtype == np.float32 and list(folded) == list(state)
  assert hf_files.with_class_weights_corrected(
      state, dict(recorded, correct_class_weights=False)) is state
  assert "2 class weights for a classifier of 3 labels" in _error(
      hf_files.with_class_weights_corrected,
      {"classifier.bias": np.zeros(3, np.float32)}, recorded)


# --long_document=windows on your own files.

def test_multi_label_pooling_is_per_label_in_numpy_and_in_graph():
  """Each label's logit pools on its own: mean and max per label, and `any` (a label predicted
  when any window predicts it) is the max of each, not single-label's one window least likely
  to be the first label. numpy (evaluation, prediction) and model.pool_windows (training by
  document, empty windows padding) give the same, by hand."""
  import tensorflow as tf

  from bert_tf.tasks.glue import model, windows
  logits = np.array([[2.0, -1.0, 0.0], [-3.0, 4.0, 1.0], [1.0, 1.0, -2.0]], np.float32)
  counts = [2, 1]  # row 0 has two windows
  expected = {"mean": [[-0.5, 1.5, 0.5], [1.0, 1.0, -2.0]],
              "max": [[2.0, 4.0, 1.0], [1.0, 1.0, -2.0]],
              "any": [[2.0, 4.0, 1.0], [1.0, 1.0, -2.0]]}
  # Single-label any picks row 0's window 1 whole (lowest p(first label)): not per label.
  np.testing.assert_array_equal(windows.pool(logits, counts, "any")[0], [-3.0, 4.0, 1.0])
  documents = np.full((2, 2, 3), 1e3, np.float32)  # padding that would win every pooling
  documents[0], documents[1, 0] = logits[:2], logits[2]
  real = tf.constant([[True, True], [True, False]])
  for pooling, values in expected.items():
    np.testing.assert_array_equal(windows.pool(logits, counts, pooling, multi_label=True),
                                  values)
    np.testing.assert_array_equal(model.pool_windows(tf.constant(documents), real, pooling,
                                                     multi_label=True).numpy(), values)


@pytest.mark.parametrize("pooling", ["mean", "max", "any"])
def test_the_exports_multi_label_pooling_equals_the_runners(pooling):
  """glue/export.windowed_logits with multi_label pools a request's windows as windows.pool
  does run_classifier's."""
  import tensorflow as tf

  from bert_tf.tasks import glue
  from bert_tf.tasks.glue import export, windows
  from bert_tf.text import BertTextTokenizer
  graph = BertTextTokenizer(VOCAB_UNCASED, True)
  texts = tf.constant(["a b c d e f g h i j", "a", "j i h g f e d c b a a b c"])

  def logits_of(features):  # a window's "logits": its first piece, minus its length, its last
    ids = tf.cast(features["input_word_ids"], tf.float32)
    length = tf.reduce_sum(tf.cast(features["input_mask"], tf.float32), 1)
    last = tf.gather(ids, tf.cast(length, tf.int32) - 2, batch_dims=1)
    return tf.stack([ids[:, 1], -length, last], axis=1)

  pooled = export.windowed_logits(graph, texts, None, 6, glue.WindowOptions(2, pooling),
                                  logits_of, multi_label=True).numpy()
  features, rows = export.window_features(graph, texts, None, 6, 2)
  counts = np.bincount(rows.numpy())
  assert counts.tolist() == [4, 1, 6]
  np.testing.assert_allclose(pooled, windows.pool(logits_of(features).numpy(), counts, pooling,
                                                  multi_label=True), rtol=1e-6)


def _own_hooks(options, **values):
  """run_classifier's OwnDataHooks on flags `values` (the rest at their defaults) and the
  RunOptions `options`."""
  import types

  from bert_tf.tasks.own_data.hooks import OwnDataHooks
  flags = dict(train_file=None, eval_file=None, predict_file=None, text_column="text",
               text_b_column=None, label_column="label", id_column=None, labels=None,
               problem_type=None, label_delimiter="|", threshold=None, class_weights="none",
               correct_class_weights=None, long_document="windows", doc_stride=None,
               window_pooling=None, window_training=None, max_train_windows=None)
  flags.update(values)
  return OwnDataHooks(types.SimpleNamespace(**flags), options)


LONG = "a b c d e f g h i j"  # ten words, each one piece of the uncased vocab


def test_own_windows_single_label_records_pooling_and_weighted_loss(tmp_path):
  """Single-label, training by document: a record per row holding its first windows; eval
  records every window; a row's probabilities are the softmax of its windows' mean logits, and
  eval_loss is the class-weighted cross-entropy of those pooled logits, by hand."""
  import types

  from bert_tf import tokenization
  from bert_tf.config import BertConfig
  from bert_tf.data import example_codec
  from bert_tf.runner import Run, RunOptions
  from bert_tf.tasks.own_data import model
  path = _write(tmp_path, "t.csv", "text,label\n%s,pos\nb c,neg\n" % LONG)
  options = RunOptions(max_seq_length=8, do_train=True, do_eval=True,
                       output_dir=str(tmp_path / "out"), train_batch_size=2)
  hooks = _own_hooks(options, train_file=path, eval_file=path, class_weights="2,0.5",
                     doc_stride=4, max_train_windows=2, window_training="document")
  hooks.check(options)
  run = Run(options, None, None, tokenization.FullTokenizer(VOCAB_UNCASED, True))
  rows = hooks.read_examples(run, "train")
  train = [example_codec.parse_example(r) for r in hooks.encode(run, "train", rows)]
  assert hooks.window_counts(run, rows) == [2, 1]  # 6 pieces a window, 4 apart: 0-6, 4-10
  assert [len(r["input_ids"]) for r in train] == [16, 16]  # two windows end to end
  assert [r["label_ids"] for r in train] == [[1], [0]]  # labels sorted: neg, pos
  assert train[1]["input_mask"][8:] == [0] * 8  # an empty window after its one
  assert hooks.feature_spec(run, "train")["input_ids"][0] == 16
  examples = hooks.read_examples(run, "eval")
  assert len(list(hooks.encode(run, "eval", examples))) == 3
  logits = np.array([[1.0, 3.0], [3.0, -1.0], [0.0, 2.0]], np.float32)
  values = hooks.row_values(run, examples, {"logits": logits})
  mean = np.array([[2.0, 1.0], [0.0, 2.0]])
  np.testing.assert_allclose(values, np.exp(mean) / np.exp(mean).sum(1, keepdims=True),
                             rtol=1e-6)
  run.trainer = types.SimpleNamespace(model=model.OwnDataModel(
      BertConfig.from_json_file(TINY.config), num_labels=2, class_weights=[2.0, 0.5]))
  # Row 0 (pos, weight 0.5): -log softmax([2, 1])[1]; row 1 (neg, 2): -log softmax([0, 2])[0].
  by_hand = (0.5 * math.log1p(math.e) + 2 * math.log1p(math.exp(2))) / 2
  assert hooks.pooled_loss(run, examples, {"logits": logits}) == pytest.approx(by_hand, rel=1e-6)
  run.trainer.model.correct_class_weights = True  # the eval loss leaves the weights out
  unweighted = (math.log1p(math.e) + math.log1p(math.exp(2))) / 2
  assert hooks.pooled_loss(run, examples, {"logits": logits}) == pytest.approx(unweighted,
                                                                               rel=1e-6)
  settings = hooks.settings(run)
  assert settings["correct_class_weights"] is True  # the default of a training run
  assert {k: settings[k] for k in ("long_document", "doc_stride", "window_pooling",
                                   "window_training", "max_train_windows")} == {
      "long_document": "windows", "doc_stride": 4, "window_pooling": "mean",
      "window_training": "document", "max_train_windows": 2}
  assert hooks.export_settings(run)["doc_stride"] == 4


def test_own_windows_regression_pools_predictions(tmp_path):
  """Regression, training every window: the windows of each row carry its score, a row's
  prediction is the max of its windows' outputs (--window_pooling=max), and eval_loss the
  squared error of those."""
  import types

  from bert_tf import tokenization
  from bert_tf.config import BertConfig
  from bert_tf.data import example_codec
  from bert_tf.runner import Run, RunOptions
  from bert_tf.tasks.own_data import model
  path = _write(tmp_path, "r.jsonl", '{"text": "%s", "label": 1.5}\n{"text": "a", "label": 0.5}'
                '\n' % LONG)
  options = RunOptions(max_seq_length=8, do_train=True, do_eval=True, do_predict=True,
                       output_dir=str(tmp_path / "out"), train_batch_size=2,
                       num_train_epochs=2.0, warmup_proportion=0.0)
  hooks = _own_hooks(options, train_file=path, eval_file=path, predict_file=path, doc_stride=4,
                     window_pooling="max", window_training="window")
  hooks.check(options)
  run = Run(options, None, None, tokenization.FullTokenizer(VOCAB_UNCASED, True))
  rows = hooks.read_examples(run, "train")
  train = [example_codec.parse_example(r) for r in hooks.encode(run, "train", rows)]
  assert sorted(r["label_ids"][0] for r in train) == [0.5, 1.5, 1.5]  # rows in shuffled order
  assert hooks.train_steps(run, rows)[0] == 3  # 3 windows (not 2 rows), batches of 2, 2 epochs
  predict = hooks.read_examples(run, "predict")
  assert len(list(hooks.encode(run, "predict", predict))) == 3
  values = hooks.row_values(run, predict, {"predictions": np.array([0.25, 2.0, -1.0, 9.0])})
  np.testing.assert_array_equal(values, [2.0, -1.0])  # batch padding after the real windows
  examples = hooks.read_examples(run, "eval")
  assert len(list(hooks.encode(run, "eval", examples))) == 3
  run.trainer = types.SimpleNamespace(model=model.OwnDataModel(
      BertConfig.from_json_file(TINY.config), num_labels=1, problem_type="regression"))
  assert hooks.pooled_loss(run, examples, {"predictions": np.array([0.25, 2.0, -1.0])}) == (
      pytest.approx(((2.0 - 1.5) ** 2 + (-1.0 - 0.5) ** 2) / 2))


@pytest.mark.parametrize("values, expected", [
    (dict(window_pooling="any"),
     "--window_pooling=any picks the window least likely to be the first label, and this run "
     "has no labels (regression); use mean or max."),
    (dict(long_document="truncate", doc_stride=64),
     "--doc_stride=64 is for --long_document=windows; drop it or add --long_document=windows."),
    (dict(long_document="truncate", max_train_windows=2),
     "--max_train_windows=2 is for --long_document=windows; drop it or add "
     "--long_document=windows."),
    (dict(text_b_column="b", max_seq_length=4),
     "--max_seq_length=4 leaves no room for a window of text_a beside text_b ([CLS] a [SEP] b "
     "[SEP]); --long_document=windows on this run needs at least 5."),
])
def test_own_windows_bad_flags_are_one_line(tmp_path, values, expected):
  from bert_tf.runner import RunOptions
  path = _write(tmp_path, "r.csv", "text,b,label\nx,y,1.5\nz,w,0.5\n")
  values = dict(values)
  options = RunOptions(max_seq_length=values.pop("max_seq_length", 16), do_train=True,
                       output_dir=str(tmp_path / "out"))
  hooks = _own_hooks(options, train_file=path, **values)
  assert _error(hooks.check, options) == expected


LONG_MULTI = "".join(json.dumps({"text": t, "label": l}) + "\n" for t, l in [
    ("the team won the match and the fans sang in the city all night while the club paid its "
     "players more money than the bank had", ["sport", "money"]),
    ("rates rose", ["money"]),
    ("a quiet day in the park with the dog and a long walk by the water until the sun went "
     "down behind the hills", []),
    ("the game was over when the last player ran home and the crowd left the ground", ["sport"]),
])


@pytest.mark.slow
def test_multi_label_windows_train_by_document_predict_and_export(tmp_path, script_session):
  """--long_document=windows on a JSONL multi-label file: a training record per row (its first
  windows), one prediction per row, its probabilities the sigmoid of the max of each label's
  logit over the row's windows (the export's ids signature run on each window, pooled by hand),
  eval_loss from those pooled logits, and the export's answer on the long texts the same."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the export's tokenizer ops)

  from bert_tf import tokenization
  from bert_tf.data import example_codec
  from bert_tf.tasks.own_data import features
  path = _write(tmp_path, "long.jsonl", LONG_MULTI)
  done = run_script("run_classifier.py", *_common(
      tmp_path, "windows", path, "--long_document=windows", "--window_pooling=any",
      "--doc_stride=6", "--max_train_windows=2", "--window_training=document"),
      shared=script_session)
  assert done.returncode == 0, done.stderr[-3000:]
  out, labels = tmp_path / "windows", ["money", "sport"]
  tokenizer = tokenization.FullTokenizer(VOCAB_UNCASED, True)
  rows = data.with_labels(path, data.read_rows(path, COLUMNS, "--train_file"), "multi_label",
                          "|")
  documents = [features.encode_document(r, 16, tokenizer, "multi_label", labels, 6, 2)
               for r in rows]
  records = [r.numpy() for r in tf.data.TFRecordDataset(str(out / "train.tf_record"))]
  assert records == [record for record, _ in documents]  # one a row, in the file's order
  assert max(count for _, count in documents) > 2 and min(count for _, count in documents) == 1
  # Each window's logits from the export's ids signature, pooled by hand: the max per label.
  serve_ids = tf.saved_model.load(str(tmp_path / "windows_x")).signatures["serve_ids"]
  pooled = []
  for row in rows:
    windows = [example_codec.parse_example(r) for r in features.encode_windows(
        row, 16, tokenizer, "multi_label", labels, True, 6)]
    logits = serve_ids(**{name: tf.constant([w[key] for w in windows], tf.int32) for name, key in (
        ("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
        ("input_type_ids", "segment_ids"))})["logits"].numpy()
    pooled.append(logits.max(axis=0))
  pooled = np.array(pooled, np.float64)
  lines = _predictions(out / "predictions.jsonl")
  assert [p["row"] for p in lines] == [0, 1, 2, 3]
  probabilities = np.array([[p["probabilities"][n] for n in labels] for p in lines])
  np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-pooled)), atol=1e-5)
  results = _results(out / "eval_results.txt")
  gold = np.array([[n in r.label for n in labels] for r in rows], np.float64)
  bce = np.mean(np.logaddexp(0, pooled) - gold * pooled, axis=1)
  assert float(results["eval_loss"]) == pytest.approx(np.mean(bce), rel=1e-4)
  assert float(results["eval_micro_f1"]) == pytest.approx(metrics.multi_label_metrics(
      probabilities, gold, labels, 0.5)["eval_micro_f1"])
  settings = json.load(open(out / "training_state" / "settings.json"))
  assert {k: settings[k] for k in ("long_document", "doc_stride", "window_pooling",
                                   "window_training", "max_train_windows")} == {
      "long_document": "windows", "doc_stride": 6, "window_pooling": "any",
      "window_training": "document", "max_train_windows": 2}
  # The export cuts and pools the long texts in-graph: predictions.jsonl's answers.
  answer = _answer(tmp_path / "windows_x", [r.text_a for r in rows])
  np.testing.assert_allclose(answer["probabilities"], probabilities, atol=1e-5)
  assert [[x.decode() for x in row if x] for row in answer["labels"]] == [
      p["labels"] for p in lines]
  # A resume that would cut other windows stops before writing anything.
  before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != LOCK_NAME}
  refused = run_script("run_classifier.py", *_common(
      tmp_path, "windows", path, "--long_document=windows", "--window_pooling=any",
      "--doc_stride=4", "--max_train_windows=2", "--window_training=document"),
      shared=script_session)
  assert refused.returncode == 2, refused.stderr[-2000:]
  assert "doc_stride: 6 when the state was saved, 4 now" in refused.stderr
  assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != LOCK_NAME} == (
      before)


def test_own_windows_weights_read_without_windows_warn(tmp_path, caplog):
  """As GLUE's: evaluating weights trained on windows with truncated texts is allowed, and the
  log names the flags they were trained with."""
  import logging

  from bert_tf.runner import RunOptions
  caplog.set_level(logging.INFO, logger="absl")
  out = tmp_path / "out"
  _state(out, {"problem_type": "single_label", "labels": ["neg", "pos"], "train_data": {},
               "long_document": "windows", "doc_stride": 6})
  path = _write(tmp_path, "e.csv", "text,label\nhi,pos\n")
  options = RunOptions(max_seq_length=16, do_eval=True, output_dir=str(out))
  _own_hooks(options, eval_file=path, long_document="truncate").check(options)
  assert ("were trained with --long_document=windows --doc_stride=6; this run reads its texts "
          "with --long_document=truncate (allowed; pass --long_document=windows --doc_stride=6 "
          "to read them as training did)") in caplog.text


def test_own_windows_pool_by_any_for_multi_label_by_default(tmp_path):
  """Multi-label windows pool by any unless told (a label present when a window says so);
  single-label by mean (any needs the "no" label first); a given pooling is kept."""
  from bert_tf.runner import RunOptions
  multi = _write(tmp_path, "m.jsonl", '{"text": "a b", "label": ["x"]}\n'
                                      '{"text": "c", "label": []}\n')
  single = _write(tmp_path, "s.csv", "text,label\na b,pos\nc,neg\n")
  options = RunOptions(max_seq_length=8, do_train=True, output_dir=str(tmp_path / "out"))
  for path, pooling, expected in ((multi, None, "any"), (single, None, "mean"),
                                  (multi, "mean", "mean")):
    hooks = _own_hooks(options, train_file=path, window_pooling=pooling)
    hooks.check(options)
    assert hooks.windows.pooling == expected, (path, pooling)


def test_own_windows_any_on_sorted_single_labels_warns(tmp_path, caplog):
  """any reads the first label as the 'no'; sorted labels may put the topic first ('corn' <
  'other'): the log names it and the fix, unless --labels set the order or the pooling is
  not any."""
  import logging

  from bert_tf.runner import RunOptions
  caplog.set_level(logging.WARNING, logger="absl")
  single = _write(tmp_path, "s.csv", "text,label\na b,other\nc,corn\n")
  options = RunOptions(max_seq_length=8, do_train=True, output_dir=str(tmp_path / "out"))
  _own_hooks(options, train_file=single, window_pooling="any").check(options)
  assert "reads the first label, 'corn', as the 'no'" in caplog.text
  assert "(labels now: corn,other)" in caplog.text
  caplog.clear()
  _own_hooks(options, train_file=single, window_pooling="any",
             labels=["other", "corn"]).check(options)
  assert "as the 'no'" not in caplog.text
  _own_hooks(options, train_file=single).check(options)  # pools by mean: no 'no' label
  assert "as the 'no'" not in caplog.text


def test_presence_label_is_the_majority_of_a_two_label_file_whatever_the_order():
  """A two-label file whose majority label holds at least 80% of the rows reads as presence
  (a topic and its 'no'); by count, so the label order (sorted or --labels) does not matter."""
  from bert_tf.tasks.own_data import labels
  rows = data.with_labels("f", _labeled(["other"] * 4 + ["corn"]), "single_label", "|")
  assert labels.presence_label(rows, "single_label", ["corn", "other"]) == "other"
  assert labels.presence_label(rows, "single_label", ["other", "corn"]) == "other"
  three_of_four = data.with_labels("f", _labeled(["other"] * 3 + ["corn"]), "single_label", "|")
  assert labels.presence_label(three_of_four, "single_label", ["corn", "other"]) is None
  three = data.with_labels("f", _labeled(["a"] * 9 + ["b", "c"]), "single_label", "|")
  assert labels.presence_label(three, "single_label", ["a", "b", "c"]) is None
  assert labels.presence_label(rows, "regression", None) is None


def test_own_windows_pool_by_any_with_the_presence_label_as_the_no(tmp_path, caplog):
  """With a presence label, single-label windows pool by any and read that label as the 'no'
  whatever its place in the label order; the run records it, so a run that only predicts pools
  alike; a balanced file pools by mean."""
  import logging

  from bert_tf.runner import RunOptions
  from bert_tf.tasks.own_data import labels
  caplog.set_level(logging.WARNING, logger="absl")
  topic = _write(tmp_path, "t.csv", "text,label\n" + "a b,other\n" * 4 + "c,corn\n")
  balanced = _write(tmp_path, "b.csv", "text,label\na b,other\nc,corn\n")
  options = RunOptions(max_seq_length=8, do_train=True, output_dir=str(tmp_path / "out"))
  for path, given, expected in ((topic, None, ("any", 1)), (topic, ["other", "corn"], ("any", 0)),
                                (balanced, None, ("mean", 0))):
    hooks = _own_hooks(options, train_file=path, labels=given)
    hooks.check(options)
    assert (hooks.windows.pooling, hooks.windows.no_label) == expected, (path, given)
  assert "as the 'no'" not in caplog.text  # the 'no' is the presence label, not the first
  hooks = _own_hooks(options, train_file=topic)
  os.makedirs(options.output_dir)
  labels.write(options.output_dir, hooks.schema())
  predicting = RunOptions(max_seq_length=8, do_predict=True, output_dir=options.output_dir)
  predict = _write(tmp_path, "p.csv", "text\nx y\n")
  later = _own_hooks(predicting, predict_file=predict)
  later.check(predicting)
  assert later.schema().no_label == "other"
  assert (later.windows.pooling, later.windows.no_label) == ("any", 1)
