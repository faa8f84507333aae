"""A run holding its --output_dir's lock for a minute, printing "locked" once it holds it
(tests/test_run_lock.py kills it). argv: the folder, then flags the lock records."""

import sys
import time

from bert_tf.runner import run_lock

run_lock.acquire(sys.argv[1])
print("locked", flush=True)
time.sleep(60)
