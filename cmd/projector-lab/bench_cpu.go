package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// machineTicks is the machine's CPU time since boot, from /proc/stat, in
// clock ticks: busy (every state but idle and iowait) and total, and its
// number of cores. ok is false where there is no /proc/stat (not Linux).
func machineTicks() (busy, total uint64, cpus int, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, 0, false
	}
	first := sc.Text()
	for sc.Scan() { // the machine's cores: its cpuN lines (not this process's cpuset)
		if line := sc.Text(); strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			cpus++
		}
	}
	fields := strings.Fields(first)
	if len(fields) < 5 || fields[0] != "cpu" || cpus == 0 {
		return 0, 0, 0, false
	}
	for i, s := range fields[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		if i >= 8 { // guest and guest_nice are in user and nice already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, cpus, true
}

// busyCores measures how many of the machine's cores were busy, on
// average, from its call to the call of the function it returns: every
// process's, the servers' included (the Mongo-wire server, PostgreSQL, the
// event store's). It says whether a way had cores left to overlap more
// work on: a way that keeps every core busy cannot go faster by doing two
// things at once. -1 where it cannot be measured.
func busyCores() (stop func() float64) {
	busy0, total0, cpus, ok := machineTicks()
	return func() float64 {
		busy1, total1, _, ok1 := machineTicks()
		if !ok || !ok1 || total1 <= total0 {
			return -1
		}
		return float64(busy1-busy0) / float64(total1-total0) * float64(cpus)
	}
}

// machineCores is the machine's number of cores, as /proc/stat counts
// them; runtime.NumCPU (this process's) where it cannot be read.
func machineCores() int {
	if _, _, cpus, ok := machineTicks(); ok {
		return cpus
	}
	return runtime.NumCPU()
}
