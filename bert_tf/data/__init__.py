"""Features as records: tf.train.Example encoding, the tf.data readers, pair packing."""
