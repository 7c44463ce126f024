package main_test

import (
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/projector/esdbtest"
	"github.com/revgate/projector/internal/lockedbuf"
	"github.com/revgate/projector/internal/mongotest"
	"github.com/revgate/projector/projector"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func metric(t *testing.T, body, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics:\n%s", name, body)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRun_metrics_move_during_a_run_and_readyz_turns_ready_when_caught_up(t *testing.T) {
	srv := esdbtest.New(t)
	client := srv.Client(t)
	db := mongotest.Database(t)
	carts := map[string][]projector.Event{}
	appendCarts(t, client, 0, 300, 10, carts)
	total := 0
	for _, evs := range carts {
		total += len(evs)
	}

	var stderr lockedbuf.Buffer
	cmd := exec.Command(binary(t), "run", "--esdb", srv.URI(), "--mongo", mongotest.URI(t), "--database", db.Name(), "--projections", "cart_details",
		"--http", "127.0.0.1:0", "--checkpoint-interval", "100ms",
		// Small batches: a batch folds its carts' streams to their ends, and
		// at the default size one batch may apply the whole log at once.
		"--batch", "20")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("projector's log:\n%s", stderr.String())
		}
	})

	addrRe := regexp.MustCompile(`msg=http addr=(\S+)`)
	var base string
	for deadline := time.Now().Add(time.Minute); base == ""; time.Sleep(5 * time.Millisecond) {
		if m := addrRe.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no http address in the log:\n%s", stderr.String())
		}
	}
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d %q", code, body)
	}
	applied := `projector_events_total{outcome="applied",projection="cart_details"}`
	var seen []float64
	notReady := 0
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		code, _ := get(t, base+"/readyz")
		_, body := get(t, base+"/metrics")
		if v := metric(t, body, applied); len(seen) == 0 || v != seen[len(seen)-1] {
			seen = append(seen, v)
		}
		if code == http.StatusOK {
			if v := metric(t, body, applied); v != float64(total) {
				// Ready means handled to the head: every event applied.
				_, body = get(t, base+"/metrics")
				if v = metric(t, body, applied); v != float64(total) {
					t.Fatalf("ready with %v of %d events applied", v, total)
				}
			}
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz answered %d", code)
		}
		notReady++
		if time.Now().After(deadline) {
			t.Fatalf("not ready in time; applied %v\n%s", seen, stderr.String())
		}
	}
	t.Logf("%d events; /readyz said 503 %d times; the applied counter took %d values, from %v to %v", total, notReady, len(seen), seen[0], seen[len(seen)-1])
	if notReady == 0 || len(seen) < 3 {
		t.Fatalf("the run was not observed catching up: %d not-ready answers, applied counter values %v", notReady, seen)
	}
	_, body := get(t, base+"/metrics")
	for _, name := range []string{
		`projector_caught_up{projection="cart_details"}`,
		`projector_store_seconds_count{collection="cart_details",op="write_many"}`,
		`projector_deliveries_total{projection="cart_details"}`,
		`projector_batches_total{projection="cart_details"}`,
		`projector_batched_events_total{projection="cart_details"}`,
		`projector_state{projection="cart_details",state="running"}`,
	} {
		if v := metric(t, body, name); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if v := metric(t, body, `projector_lag_seconds{projection="cart_details"}`); v != 0 {
		t.Errorf("lag %v seconds while caught up", v)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		exited = true
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}
