// Package produce is the idempotent produce path behind sdk.Writer: it
// encodes record batches that carry a producer ID, epoch and per-partition
// sequence (KIP-98), sends them with kafka-go's Transport, and decides
// what a failed batch becomes: resent as the very same bytes, counted as
// already stored, re-sequenced under a bumped epoch, or an error.
//
//	p := produce.New(produce.Config{Transport: tr, Addr: addr, Policy: policy})
//	b := &produce.Batch{Topic: "events", Partition: 0, Messages: msgs}
//	err := p.Produce(ctx, []*produce.Batch{b}) // at most one Batch per partition
//	// err: no producer ID; b.Err: this batch's outcome
//
// ProduceEach also reports each batch as soon as its outcome is known,
// while the others may still be resent.
//
// The rules it follows, from the broker's side (KIP-98, KIP-360):
//
//   - A partition's sequence starts at 0 under each producer ID and epoch
//     and advances only when a batch is acknowledged.
//   - A retry resends the same batch: same epoch, base sequence and
//     records. A batch the broker already stored is answered as a success
//     (or DUPLICATE_SEQUENCE_NUMBER), never stored twice; the broker
//     remembers the last five batches of each producer and partition.
//   - One batch per partition is in flight at a time, so a partition's
//     batches are stored in the order they were produced.
//   - UNKNOWN_PRODUCER_ID, or OUT_OF_ORDER_SEQUENCE_NUMBER for the only
//     batch in flight, means the broker lost the producer's state: the
//     producer's epoch is bumped and the partition starts again at
//     sequence 0 — unless an earlier attempt of that batch has an unknown
//     outcome: it may be stored, so it is an error, as below.
//   - INVALID_PRODUCER_EPOCH or PRODUCER_FENCED: the batch fails at once,
//     and the partition's next batch takes a new producer ID.
//   - A batch whose outcome stays unknown after the retry budget is an
//     error, and its partition moves to a new epoch before its next batch,
//     so that the unknown sequence is never reused for other records.
//
// It is internal: its only user is sdk.Writer.
package produce
