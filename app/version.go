package app

import (
	"context"
	"fmt"
	"runtime/debug"
)

func (c Config) runVersion(_ context.Context, inv Invocation) error {
	fs := inv.FlagSet("")
	if err := ParseFlags(fs, inv.Args); err != nil {
		return err
	}
	v := c.Version
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
	fmt.Fprintf(inv.Stdout, "%s %s (%s)\n", c.name(), v, goVersion)
	return nil
}
