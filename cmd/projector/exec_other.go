//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
)

// execLab runs the lab binary bin with args (args[0] its name), its
// terminal this process's, and returns its exit status.
func execLab(bin string, args []string) error {
	cmd := exec.Command(bin, args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		os.Exit(exit.ExitCode()) // the demo said why
	}
	return err
}
