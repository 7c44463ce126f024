//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// execLab replaces this process with the lab binary bin, run with args
// (args[0] its name).
func execLab(bin string, args []string) error {
	if err := syscall.Exec(bin, args, os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", bin, err)
	}
	return nil // not reached
}
