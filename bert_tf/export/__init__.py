"""SavedModel exports and what converts them (TF-Hub, LiteRT, MediaPipe metadata).

The export core's names (bert_tf.export.core), which every task's export builds on."""

from bert_tf.export.core import (
    DEFAULT_SIGNATURE,
    IDS_INPUTS,
    IDS_SIGNATURE,
    METADATA_DIR,
    METADATA_FILE,
    VOCAB_FILE,
    ServingModule,
    check_export_dir,
    checked_ids,
    holds_files,
    ids_specs,
    locked,
    make_tokenizer,
    read_metadata,
    replacing,
    save_serving_module,
    serving_function,
    text_spec,
)
