package projector

import (
	"testing"
	"time"
)

// fillAtHead fills, at the head (the source caught up) with a window of w,
// a batch that begins with an event queued late before now, from a
// partition that holds queued events; after (when not nil) sends more
// events to it once fill looked, then closes it.
func fillAtHead(late, w time.Duration, queued int, after func(chan<- item)) []item {
	r := &Runner{window: w, batchBytes: DefaultBatchBytes}
	r.caughtUp.Store(true)
	x := &run{r: r, bounds: batchBounds{events: 1000}}
	part := make(chan item, queued+10)
	for range queued {
		part <- item{queued: time.Now()}
	}
	if after != nil {
		go after(part)
	}
	return x.fill([]item{{queued: time.Now().Add(-late)}}, part, nil)
}

// At the head, a worker that keeps up (its first event waited less than
// the window, here half of it) writes what is queued at once: it does not
// wait for the window to gather more. The window here is an hour, so that
// a wait shows as a fill that does not return, whatever the machine's
// load.
func TestFill_at_the_head_a_worker_that_keeps_up_does_not_wait(t *testing.T) {
	done := make(chan []item, 1)
	go func() { done <- fillAtHead(30*time.Minute, time.Hour, 2, nil) }()
	select {
	case got := <-done:
		if len(got) != 3 {
			t.Fatalf("batch of %d events, want the 1 taken and the 2 queued", len(got))
		}
	case <-time.After(time.Minute):
		t.Fatal("fill waited for more events at the head, its first event not late: each event would wait the window")
	}
}

// At the head, a worker behind a burst (its first event waited longer than
// the window: a hiccup) waits for the events that come next, so that the
// burst is written in batches; once it keeps up again (the test above) it
// writes events as they come.
func TestFill_at_the_head_a_worker_behind_gathers_the_burst(t *testing.T) {
	got := fillAtHead(2*time.Hour, time.Hour, 2, func(part chan<- item) {
		time.Sleep(20 * time.Millisecond)
		for range 3 {
			part <- item{queued: time.Now()}
		}
		close(part)
	})
	if len(got) != 6 {
		t.Fatalf("batch of %d events, want the 1 taken, the 2 queued and the 3 sent later", len(got))
	}
}

// At the head, a batch waits for more only when its first event is late by
// more than the window, and then no longer in all than it is late (at most
// 10 windows): a batch held 10 windows whatever the lateness took longer
// than the window to write, so each made the next late again, and events
// waited about half a second for good after one hiccup (a test measured
// that end to end, against the clock; the rule is tested here without
// one, and TestRunner_batches_a_burst_at_the_head runs it end to end).
func TestAtHead_a_batch_waits_no_longer_than_it_is_late(t *testing.T) {
	w := 100 * time.Millisecond
	for _, c := range []struct {
		late     time.Duration
		wait     bool
		hold     time.Duration
		scenario string
	}{
		{0, false, 0, "just queued"},
		{w, false, w, "late by the window"},
		{150 * time.Millisecond, true, 150 * time.Millisecond, "late by more than the window"},
		{time.Hour, true, holdWindows * w, "late by far more"},
	} {
		b, wait := atHead(batchBounds{events: 1000}, c.late, w)
		if wait != c.wait || b.hold != c.hold || b.gap != w || b.events != 1000 {
			t.Errorf("%s (%v): wait %v, hold %v, gap %v, events %d; want wait %v, hold %v, gap %v, events 1000",
				c.scenario, c.late, wait, b.hold, b.gap, b.events, c.wait, c.hold, w)
		}
	}
	if _, wait := atHead(batchBounds{}, time.Hour, 0); wait {
		t.Error("no batch window: want no wait")
	}
}
