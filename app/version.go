package app

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func (x *cli) runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := x.flags("version", "version", stderr)
	if err := ParseFlags(fs, args); err != nil {
		return err
	}
	v := x.Version
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
	fmt.Fprintf(stdout, "%s %s (%s)\n", x.name(), v, goVersion)
	return nil
}
