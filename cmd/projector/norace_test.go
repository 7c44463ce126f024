//go:build !race

package main_test

// raceEnabled: the tests run with -race.
const raceEnabled = false
