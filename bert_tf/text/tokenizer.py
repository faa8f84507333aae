"""In-graph BERT tokenization: `FullTokenizer`'s token ids as TensorFlow ops.

`BertTextTokenizer` runs inside `tf.data` and a SavedModel's `tf.function`, where Python code
cannot, and embeds the vocabulary and the character tables of the running Python's
`unicodedata` as constants, so an export needs no vocab.txt and tokenizes as the exporting
Python did. How each step of the original maps to ops: docs/faithfulness.md, "The in-graph
tokenizer".
"""

import collections.abc
import os

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization
from bert_tf.errors import UserInputError
import bert_tf.text.packing as packing
import bert_tf.text.tf_shims as tf_shims
import bert_tf.text.unicode as unicode
from bert_tf.text.unicode import char_class

_MAX_WORD_CHARS = 200  # The original WordpieceTokenizer's max_input_chars_per_word.

# The code has no tensor-dependent Python control flow, and letting AutoGraph
# convert it (and the tensorflow_text code it calls) makes every tf.function
# trace take seconds.
_plain_python = tf.autograph.experimental.do_not_convert


def _read_vocab(vocab_file_or_vocab_list):
  """token -> id; a file is read like the original (duplicates keep the last line)."""
  source = vocab_file_or_vocab_list
  if isinstance(source, (str, bytes, os.PathLike)):
    return tokenization.load_vocab(os.fsdecode(source))
  if isinstance(source, collections.abc.Mapping):
    return dict(source)
  vocab = {}
  for index, token in enumerate(source):
    vocab[tokenization.convert_to_unicode(token)] = index
  if not vocab:
    raise UserInputError("The vocabulary list is empty.")
  return vocab


def _static_table(keys, values, key_dtype, value_dtype, default):
  init = tf.lookup.KeyValueTensorInitializer(
      tf.constant(keys, key_dtype), tf.constant(values, value_dtype))
  return tf.lookup.StaticHashTable(init, default_value=default)


class BertTextTokenizer(tf.Module):
  """The original BERT FullTokenizer (and input packing) as TensorFlow graph ops.

  Args:
    vocab_file_or_vocab_list: path of a vocab.txt (read like the original), a
      sequence of tokens (id = position, a repeated token keeps its last
      position) or a token -> id mapping.
    do_lower_case: as in the original; must match the checkpoint.
    strip_accents: None strips accents exactly when lower-casing (the original);
      False keeps them while lower-casing (Hangul syllables stay whole); True
      strips them even without lower-casing. The attribute holds the resolved bool.
  """

  def __init__(self, vocab_file_or_vocab_list, do_lower_case=True, strip_accents=None,
               name=None):
    super().__init__(name=name)
    vocab = _read_vocab(vocab_file_or_vocab_list)
    if "[UNK]" not in vocab:
      raise UserInputError("The vocabulary has no [UNK] token: it is not a BERT "
                           "WordPiece vocab.")
    self.do_lower_case = bool(do_lower_case)
    self.strip_accents = tokenization.resolve_strip_accents(do_lower_case, strip_accents)
    self.vocab_size = max(vocab.values()) + 1
    self.unk_id = vocab["[UNK]"]
    self.cls_id = vocab.get("[CLS]")
    self.sep_id = vocab.get("[SEP]")
    self.pad_id = vocab.get("[PAD]")
    self.mask_id = vocab.get("[MASK]")
    # FastWordpieceTokenizer (linear-time, unlike WordpieceTokenizer)
    # takes a list whose index is the id; ids no token keeps (duplicates, gaps)
    # and the never-looked-up "" and "##" get fillers that cannot match a word,
    # which never holds brackets (they are punctuation).
    filler = "[bert_tf unused"
    while any(token.startswith(filler) for token in vocab):
      filler += "!"
    id_to_token = ["%s %d]" % (filler, i) for i in range(self.vocab_size)]
    for token, index in vocab.items():
      if token not in ("", "##"):
        id_to_token[index] = token
    self._id_to_token = tf.constant(id_to_token)
    # The vocab by id, one token a line: exports keep it beside the model (LiteRT metadata).
    self.vocab_text = "".join(token + "\n" for token in id_to_token)
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        id_to_token, suffix_indicator="##", max_bytes_per_word=4 * _MAX_WORD_CHARS,
        token_out_type=tf.int32, unknown_token="[UNK]", no_pretokenization=True)

    tables = unicode.unicode_tables()
    self._clean_pattern = char_class(tables.deleted)
    self._split_pattern = char_class(tables.spaces + tables.split_kept)
    self._keep_pattern = char_class(tables.split_kept)
    if self.do_lower_case:
      cased = char_class(tables.cased)
      ignorable = char_class(tables.ignorable)
      other = char_class(tables.cased + tables.ignorable, negate=True)
      self._sigma_pattern = r"(%s%s*)\x{3A3}(%s*(?:%s|$))" % (cased, ignorable, ignorable,
                                                               other)
    if self._maps_characters:
      char_map = tables.char_maps[(self.do_lower_case, self.strip_accents)]
      keys = sorted(char_map)
      rows = [char_map[k] for k in keys]
      lengths = [len(r) for r in rows]
      starts = [0]
      for n in lengths[:-1]:
        starts.append(starts[-1] + n)
      self._lower_table = _static_table(keys, list(range(len(keys))), tf.int32, tf.int32,
                                        -1)
      self._lower_starts = tf.constant(starts, tf.int32)
      self._lower_lengths = tf.constant(lengths, tf.int32)
      self._lower_values = tf.constant([c for r in rows for c in r], tf.int32)
    if self.strip_accents:
      marks = sorted(tables.mark_props)
      self._mark_table = _static_table(marks, [tables.mark_props[k] for k in marks],
                                       tf.int32, tf.int32, 0)

  @property
  def split_patterns(self):
    """(split, keep) RE2 patterns of the BasicTokenizer's word split, as
    `tensorflow_text.regex_split` takes them: words split at whitespace, punctuation and
    CJK characters, and the last two are kept as words of their own. For exports that
    split raw text themselves, e.g. to keep each word's offsets."""
    return self._split_pattern, self._keep_pattern

  @property
  def _maps_characters(self):
    return self.do_lower_case or self.strip_accents

  # ---------------------------------------------------------------- tokenizing

  @_plain_python
  def basic_tokenize(self, strings):
    """The original BasicTokenizer's words, RaggedTensor [batch, (words)].

    `strings` is a 1-D string tensor (a scalar gives a 1-D tensor of words).
    """
    return _per_string_vector(self._basic_tokenize, strings)

  @_plain_python
  def tokenize(self, strings):
    """Token ids, int32 RaggedTensor [batch, (pieces)], as FullTokenizer gives.

    `strings` is a 1-D string tensor (a scalar gives a 1-D tensor of ids).
    """
    return _per_string_vector(self._tokenize, strings)

  @_plain_python
  def tokenize_words(self, strings):
    """Token ids per word, int32 RaggedTensor [batch, (words), (pieces)].

    The words are the BasicTokenizer's; flattening the last two dimensions gives
    `tokenize` (the TF-Hub preprocessors' `tokenize` has this shape).
    """
    return _per_string_vector(self._tokenize_words, strings)

  @_plain_python
  def tokenize_to_pieces(self, strings):
    """Word piece strings, RaggedTensor [batch, (pieces)] (for debugging)."""
    ids = self.tokenize(strings)
    if isinstance(ids, tf.RaggedTensor):
      return ids.with_flat_values(tf.gather(self._id_to_token, ids.flat_values))
    return tf.gather(self._id_to_token, ids)

  def _basic_tokenize(self, strings):
    # Drop invalid UTF-8 (like bytes.decode("utf-8", "ignore")) before RE2 sees it.
    text = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="ignore")
    text = tf.strings.regex_replace(text, self._clean_pattern, "")
    if self._maps_characters:
      text = self._lower_and_strip_accents(text)
    return tf_shims.regex_split(text, self._split_pattern, self._keep_pattern)

  def _tokenize(self, strings):
    return tf_shims.merge_words(self._tokenize_words(strings))

  def _tokenize_words(self, strings):
    words = self._basic_tokenize(strings)
    # The original gives [UNK] for a word over 200 characters; "[UNK]" itself is
    # the vocab token and cannot be a real word (brackets are punctuation).
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > _MAX_WORD_CHARS
    words = words.with_flat_values(
        tf.where(too_long, tf.constant("[UNK]"), words.flat_values))
    return self._wordpiece.tokenize(words)

  def _lower_and_strip_accents(self, text):
    """str.lower(), NFD and Mn removal (as configured), over whole strings at once.

    Lower-casing whole cleaned strings equals the original's per-word lower-casing
    because whitespace and CJK characters (the word boundaries) are neither cased
    nor case-ignorable in the sigma rule, the only context-dependent mapping.
    All-ASCII strings (most English text) only need A-Z lowered (nothing, when
    only accents are stripped), which is cheap, so only the other rows go through
    the code point tables.
    """
    is_ascii = tf.strings.regex_full_match(text, r"[\x00-\x7F]*")
    ascii_done = tf.strings.lower(text) if self.do_lower_case else text

    def with_unicode_rows():
      other_rows = tf.where(tf.logical_not(is_ascii))
      other = self._lower_and_strip_accents_unicode(tf.gather_nd(text, other_rows))
      return tf.tensor_scatter_nd_update(ascii_done, other_rows, other)

    return tf_shims.lazy_cond(tf.reduce_all(is_ascii), lambda: ascii_done, with_unicode_rows)

  def _lower_and_strip_accents_unicode(self, text):
    """The general case of `_lower_and_strip_accents`, by code point tables."""
    if self.do_lower_case:
      text = tf.strings.regex_replace(text, self._sigma_pattern,
                                      "\\1" + unicode.FINAL_SIGMA + "\\2")
    chars = tf.strings.unicode_decode(text, "UTF-8")
    cps = chars.flat_values
    rows = chars.value_rowids()
    # Each code point expands to its table row (lower-cased NFD), or to itself.
    index = self._lower_table.lookup(cps)
    mapped = index >= 0
    safe = tf.maximum(index, 0)
    lengths = tf.where(mapped, tf.gather(self._lower_lengths, safe), 1)
    source = tf.repeat(tf.range(tf.size(cps)), lengths)
    offset = tf.range(tf.size(source)) - tf.gather(tf.cumsum(lengths, exclusive=True), source)
    table_pos = tf.gather(tf.gather(self._lower_starts, safe), source) + offset
    cps = tf.where(
        tf.gather(mapped, source),
        tf.gather(self._lower_values, table_pos),
        tf.gather(cps, source))
    rows = tf.gather(rows, source)
    if not self.strip_accents:  # str.lower() alone: no NFD, so no reordering.
      return tf.strings.unicode_encode(
          tf.RaggedTensor.from_value_rowids(cps, rows, nrows=chars.nrows(), validate=False),
          "UTF-8")
    # Canonical ordering: a stable sort by combining class inside each run that
    # starts at a class-0 character (or a new string). Only marks that survive the
    # Mn removal below can show the order, and those (a few Mc viramas, musical
    # stems, Hangul tone marks) are rare, so the sort runs only when one occurs.
    props = self._mark_table.lookup(cps)
    ccc = tf.bitwise.bitwise_and(props, 255)

    def canonical_order():
      row_start = tf.concat([tf.ones([1], tf.bool)[:tf.size(rows)],
                             tf.not_equal(rows[1:], rows[:-1])], axis=0)
      run = tf.cumsum(tf.cast(tf.logical_or(ccc == 0, row_start), tf.int64))
      return tf.argsort(run * 256 + tf.cast(ccc, tf.int64), stable=True)

    needs_order = tf.reduce_any(tf.logical_and(ccc > 0, props < 256))
    order = tf.cond(needs_order, canonical_order, lambda: tf.range(tf.size(cps)))
    cps = tf.gather(cps, order)
    keep = tf.gather(props, order) < 256
    chars = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(cps, keep), tf.boolean_mask(rows, keep),
        nrows=chars.nrows(), validate=False)
    return tf.strings.unicode_encode(chars, "UTF-8")

  # ------------------------------------------------------------------ packing

  @_plain_python
  def encode(self, text_a, text_b=None, seq_length=128):
    """Tokenizes and packs like the original's convert_single_example.

    Args:
      text_a: 1-D string tensor (or a scalar: then the outputs lose the batch axis).
      text_b: like text_a, or None for single segments; an empty string in a row
        gives that row the single-segment layout, as in the original.
      seq_length: Python int.

    Returns:
      dict of int32 [batch, seq_length]: input_word_ids, input_mask, input_type_ids.
    """
    if self.cls_id is None or self.sep_id is None:
      raise UserInputError("The vocabulary lacks [CLS] or [SEP]; it cannot pack inputs.")
    text_a, scalar = _as_string_vector(text_a)
    segments_a = self._tokenize(text_a)
    segments_b = None
    if text_b is not None:
      text_b, scalar_b = _as_string_vector(text_b)
      if scalar_b != scalar:
        raise ValueError("text_a and text_b must both be scalars or both be 1-D.")
      segments_b = self._tokenize(text_b)
      same = tf.debugging.assert_equal(
          tf.shape(text_a)[0], tf.shape(text_b)[0],
          message="text_a and text_b must have the same batch size (one text_b per text_a; "
                  "an empty string for a single sentence).")
      with tf.control_dependencies([same]):
        segments_a = tf.identity(segments_a)
    features = packing.pack_inputs(segments_a, segments_b, seq_length, self.cls_id,
                                        self.sep_id)
    if scalar:
      features = {k: v[0] for k, v in features.items()}
    return features

  @_plain_python
  def __call__(self, text_a, text_b=None, seq_length=128):
    return self.encode(text_a, text_b, seq_length)


def _as_string_vector(strings):
  """(1-D string tensor, whether the input was a scalar)."""
  strings = tf.convert_to_tensor(strings, tf.string)
  rank = strings.shape.rank
  if rank == 0:
    return tf.expand_dims(strings, 0), True
  if rank is not None and rank != 1:
    raise ValueError("Expected a 1-D tensor of strings (or a scalar), got shape %s." %
                     strings.shape)
  return tf.ensure_shape(strings, [None]), False


def _per_string_vector(batch_fn, strings):
  """`batch_fn` of a 1-D string tensor; a scalar string gives batch_fn's first row."""
  strings, scalar = _as_string_vector(strings)
  out = batch_fn(strings)
  return out[0] if scalar else out
