package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/revgate/projector/app"
)

// labMain is where the demo is, in a clone of the repository.
const labMain = "cmd/projector-lab/main.go"

// runDemo runs cmd/projector-lab's demo: the demo runs the
// EventStoreDB-protocol test server in its process, which this binary, the
// one to deploy, does not link. From a clone of the repository (go run
// ./cmd/projector demo, in it or below it), with the go command on PATH,
// it builds projector-lab in the user's cache and becomes it ([execLab]):
// signals, the exit status and the terminal are the demo's own. Elsewhere
// it says so in one line.
func runDemo(ctx context.Context, inv app.Invocation) error {
	root, ok := cloneRoot()
	if !ok {
		fmt.Fprintf(inv.Stderr, "%s demo runs from a clone of the repository (%s not found here or above): this binary links no test server; there, go run ./cmd/projector demo\n", inv.Name, labMain)
		return app.ErrUsage
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(inv.Stderr, "%s demo builds cmd/projector-lab with the go command, which is not on PATH: %v\n", inv.Name, err)
		return app.ErrUsage
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "projector", "projector-lab")
	build := exec.CommandContext(ctx, goCmd, "build", "-o", bin, "./cmd/projector-lab")
	build.Dir, build.Stdout, build.Stderr = root, inv.Stderr, inv.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building cmd/projector-lab: %w", err)
	}
	return execLab(bin, append([]string{bin, "demo"}, inv.Args...))
}

// cloneRoot returns the directory, the working one or one above it, that
// holds cmd/projector-lab.
func cloneRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(labMain))); err == nil {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}
