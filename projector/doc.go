// Package projector keeps MongoDB read models exactly right from an event
// stream that delivers events at least once, out of order across consumers, and
// to a store whose reads can be stale.
//
// A projection is plain Go: a state type S and pure functions that fold events
// into it, with no I/O. The [Engine] does all the I/O: it routes each event to
// the projections that want it, loads the document, applies the fold, and
// writes it back through the revision gate, so that every event has its effect
// on every document exactly once.
//
// # Writing a projection
//
//	details := projector.New[Details]("cart_details", projector.StreamSuffix("shopping_cart-"))
//	projector.Create(details, func(e Opened) (Details, error) {
//		return Details{ClientID: e.ClientID, Status: "Opened"}, nil
//	})
//	projector.On(details, func(d Details, e ItemAdded) (Details, error) {
//		d.Items = append(d.Items, e.Item)
//		return d, nil
//	})
//
// The document id comes from the event's stream (here the part after
// "shopping_cart-"). Events of that stream whose type has no handler leave the
// state as it is but still advance the document's revision, so the gate never
// waits for them.
//
// # The revision gate
//
// A document fed by one stream stores the stream revision of the last event it
// applied. For the event at revision n the engine:
//
//  1. creates the document when n is 0 or the event's type was registered with
//     [Create]: an insert at revision n; a duplicate key means it was applied
//     already;
//  2. otherwise reads the document with revision >= n-1; when it is not there
//     yet, the predecessor has not been applied (or is not visible yet): wait
//     with exponential backoff and jitter and read again;
//  3. skips the event as a duplicate when the revision read is above n-1;
//  4. applies the fold in memory and updates with the filter revision == n-1,
//     setting revision n; when that matches nothing, somebody else moved the
//     document: read again (step 2);
//  5. gives up when the retry policy runs out, with an [*Error] naming the
//     projection, document, stream, the revision wanted and the one seen.
//
// Errors returned by a projection's functions (a domain rule, such as removing
// more than a cart holds), payloads that do not decode, and panics are
// permanent: they fail the event at once, without retries. Under the [Skip]
// policy the document then moves past the event, unchanged, so the rest of its
// stream applies; under [Block] (the default) it stays where it is.
//
// Within one engine, events of the same document that wait for a predecessor
// queue behind it instead of each polling the store: only the lowest revision
// in flight waits on the store, and when it fails, those queued behind it fail
// at once with [ErrPredecessorFailed] instead of timing out one by one.
//
// The [Engine] keeps documents in a store that implements the interfaces of
// package projector/driver (package mongostore's Store does). Each
// projection picks how its documents stay exactly-once: its [Strategy], the
// revision gate by default.
//
// # Running from a subscription
//
// A [Runner] feeds an engine from a [Source] (package subscription has the
// EventStoreDB ones) and stores a [Checkpoint] in a [CheckpointStore] once
// every event before it is written, so that a restart resumes there. Events
// are handled by workers partitioned by stream, in order within a stream.
// After a drop the runner subscribes again from the stored checkpoint, with
// backoff; the overlap it replays comes back as duplicates. A canceled context
// stops it cleanly: events being handled finish, the checkpoint is stored.
package projector
