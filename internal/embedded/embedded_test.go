package embedded_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/revgate/projector/internal/embedded"
)

func TestStart_on_a_port_in_use_fails_without_hanging(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		s, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Addr: l.Addr().String()})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("started on a port in use")
		}
		t.Logf("error: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Start hung on a port in use")
	}
}

func TestStart_listens_at_its_URI(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URI() == "" || s.String() == "" {
		t.Fatalf("uri %q desc %q", s.URI(), s.String())
	}
	conn, err := net.DialTimeout("tcp", s.URI()[len("mongodb://"):len(s.URI())-1], 5*time.Second)
	if err != nil {
		t.Fatalf("not listening at %s: %v", s.URI(), err)
	}
	conn.Close()
}

func TestStart_a_second_server_on_one_data_dir_is_refused_naming_the_holder(t *testing.T) {
	dir := t.TempDir()
	first, err := embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = embedded.Start(embedded.Config{Dir: dir})
	if !errors.Is(err, embedded.ErrDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("process %d serves %s at %s", os.Getpid(), dir, first.URI())) ||
		!strings.HasSuffix(err.Error(), "--mongo "+first.URI()) {
		t.Fatalf("second Start: %v, want ErrDirInUse naming this process and its server", err)
	}
	var inUse *embedded.InUseError
	if !errors.As(err, &inUse) || inUse.ServedAt() != first.URI() {
		t.Fatalf("second Start: %#v, want the first server's URI", err)
	}
	first.Close()
	again, err := embedded.Start(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}

// A data dir whose path the SQLite backend cannot open is refused in one
// line that says why, before FerretDB starts.
func TestStart_a_data_dir_the_SQLite_backend_cannot_open_is_refused_in_one_line(t *testing.T) {
	for _, name := range []string{"data#1", "what?", "100%"} {
		dir := t.TempDir() + "/" + name
		s, err := embedded.Start(embedded.Config{Dir: dir})
		if err == nil {
			s.Close()
			t.Fatalf("%s: started", name)
		}
		if msg := err.Error(); !strings.Contains(msg, "cannot open a path with") || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line saying why", name, msg)
		}
	}
}
