package main

import (
	"runtime"
	"testing"
	"time"
)

func TestOverlapFloor_is_the_CPU_of_both_over_the_cores_and_never_below_the_longer(t *testing.T) {
	n := float64(machineCores())
	// Both ways kept every core busy: overlap buys nothing.
	if got := overlapFloor(400*time.Millisecond, n, 300*time.Millisecond, n); got != 700*time.Millisecond {
		t.Errorf("every core busy: %v, want 700ms", got)
	}
	// Each kept one core of n busy: done at once, the longer bounds it
	// where n >= 2.
	got := overlapFloor(400*time.Millisecond, 1, 300*time.Millisecond, 1)
	want := max(400*time.Millisecond, time.Duration(0.7/n*float64(time.Second)))
	if got != want {
		t.Errorf("one core each: %v, want %v", got, want)
	}
}

func TestMedianCores_is_unknown_when_a_round_could_not_measure(t *testing.T) {
	if got := medianCores([]float64{1.5, 0.5, 2}); got != 1.5 {
		t.Errorf("median: %v, want 1.5", got)
	}
	if got := medianCores([]float64{1.5, -1, 2}); got != -1 {
		t.Errorf("a round unknown: %v, want -1", got)
	}
	if got := medianCores(nil); got != -1 {
		t.Errorf("no rounds: %v, want -1", got)
	}
}

func TestBusyCores_measures_a_busy_core_on_Linux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("busyCores reads /proc/stat, which only Linux has")
	}
	stop := busyCores()
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) { // one goroutine keeps a core busy
	}
	got := stop()
	if got <= 0 || got > float64(machineCores())+0.01 {
		t.Errorf("busy cores %v while one spun, want above 0 and at most %d", got, machineCores())
	}
}
