package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise
// the module version from the build info is used.
var version = ""

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	v := version
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "" {
			v = bi.Main.Version
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(stdout, "projector %s (%s)\n", v, goVersion)
	return nil
}
