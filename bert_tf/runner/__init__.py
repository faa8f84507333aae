"""The runners' template, their shared flags and the lock on --output_dir.

What a runner script and a task's hooks use (bert_tf.runner.template)."""

from bert_tf.runner.shared_flags import RunOptions
from bert_tf.runner.template import (
    SPLITS,
    Records,
    Run,
    TaskHooks,
    check_export_apart,
    check_no_stale_checkpoints,
    check_weights_exist,
    main,
    prepare,
    run_task,
    warn_if_slow_bfloat16,
    weights_digest,
    write_test_results,
)
