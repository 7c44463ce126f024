// Package lockedbuf is a buffer that goroutines, or a process's output, may
// write to while a test reads it, and a writer whose writes to another one
// are made one at a time (app.Config.Run's stdout and stderr).
package lockedbuf

import (
	"bytes"
	"io"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writes and reads; its zero
// value is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Writer writes to W under Mu: writers that share a mutex write one at a
// time, whatever W is.
type Writer struct {
	Mu *sync.Mutex
	W  io.Writer
}

// Write writes p to W, holding Mu.
func (w Writer) Write(p []byte) (int, error) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	return w.W.Write(p)
}
