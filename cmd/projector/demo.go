package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/revgate/projector/app"
)

// labMain is where the demo is, in a clone of the repository.
const labMain = "cmd/projector-lab/main.go"

// runDemo runs cmd/projector-lab's demo with go run: the demo runs the
// EventStoreDB-protocol test server in its process, which this binary, the
// one to deploy, does not link. It works from the root of a clone of the
// repository (go run ./cmd/projector demo), with the go command on PATH;
// elsewhere it says so in one line.
func runDemo(ctx context.Context, inv app.Invocation) error {
	if _, err := os.Stat(filepath.FromSlash(labMain)); err != nil {
		fmt.Fprintf(inv.Stderr, "%s demo runs from the root of a clone of the repository (%s not found): this binary links no test server; there, go run ./cmd/projector demo\n", inv.Name, labMain)
		return app.ErrUsage
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(inv.Stderr, "%s demo runs cmd/projector-lab with the go command, which is not on PATH: %v\n", inv.Name, err)
		return app.ErrUsage
	}
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"run", "./cmd/projector-lab", "demo"}, inv.Args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, inv.Stdout, inv.Stderr
	// Stopped (SIGINT, SIGTERM), the demo is told as it would be, and has
	// time to stop its servers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) && ctx.Err() == nil {
		return fmt.Errorf("demo: %s", exit.ProcessState)
	}
	return err
}
