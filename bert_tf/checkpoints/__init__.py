"""Any checkpoint source as Google-named weights, HF folders, conversions, checks.

Opening, loading and saving (bert_tf.checkpoints.sources) are handed on here."""

from bert_tf.checkpoints.sources import (
    GOOGLE_CHECKPOINT_NAME,
    GOOGLE_CONFIG_NAME,
    CheckpointSource,
    check_source,
    encoder_variable_map,
    load_checkpoint,
    load_groups,
    open_source,
    read_variables,
    resolve_checkpoint_path,
    save_checkpoint,
    variable_groups,
    variable_map,
    variable_map_of,
)
