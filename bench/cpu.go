package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// cpuObserver measures, over the measured window, the CPU of each root process, of its
// descendants apart ("<name>'s children": a tool host's shim and servers, a proxy's servers)
// and of the load generator; with ZEST_BENCH_PROFILE=DIR and profiles set, it also takes a
// CPU profile of every Go process over that window into DIR/<label>-<process>.prof. report
// prints the CPU per call (ZEST_BENCH_CPU=1), row gives it as a table row.
type cpuObserver struct {
	roots         map[string]int    // process name → pid
	profiles      map[string]string // process name → pprof address
	label         string
	window        time.Duration // the measured window: the length of each process's profile
	before, after map[string]int64
	stopProf      func()
}

// sample returns utime+stime in clock ticks of each root, of its descendants, and of this
// process.
func (o *cpuObserver) sample() map[string]int64 {
	out := map[string]int64{"bench (load generator)": ticks(os.Getpid())}
	children := procChildren()
	for name, root := range o.roots {
		for i, pid := range processTree(children, root) {
			if i == 0 {
				out[name] += ticks(pid)
			} else {
				out[name+"'s children"] += ticks(pid)
			}
		}
	}
	return out
}

func (o *cpuObserver) begin() {
	if dir := os.Getenv("ZEST_BENCH_PROFILE"); dir != "" && len(o.profiles) > 0 {
		o.stopProf = startProfiles(dir, o.label, o.profiles, o.window)
	}
	o.before = o.sample()
}

func (o *cpuObserver) end() {
	o.after = o.sample()
	if o.stopProf != nil {
		o.stopProf()
	}
}

// perCall returns the names measured, sorted, the µs of CPU each spent per call, and their sum.
func (o *cpuObserver) perCall(calls int) ([]string, map[string]float64, float64) {
	names := make([]string, 0, len(o.after))
	for name := range o.after {
		names = append(names, name)
	}
	sort.Strings(names)
	us := map[string]float64{}
	total := 0.0
	for _, name := range names {
		us[name] = float64(o.after[name]-o.before[name]) / float64(calls) * 1e6 / 100
		total += us[name]
	}
	return names, us, total
}

// report prints the CPU per call of each process to stderr, with ZEST_BENCH_CPU set.
func (o *cpuObserver) report(conc, calls int) {
	if os.Getenv("ZEST_BENCH_CPU") == "" || calls == 0 || o.after == nil {
		return
	}
	names, us, total := o.perCall(calls)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  c=%d %s: %.0f µs CPU per call\n", conc, name, us[name])
	}
	fmt.Fprintf(os.Stderr, "  c=%d all: %.0f µs CPU per call\n", conc, total)
}

// row returns one row of a CPU table: µs of CPU per call of each process, and their sum.
func (o *cpuObserver) row(target string, conc, calls int) string {
	if calls == 0 || o.after == nil {
		return ""
	}
	names, us, total := o.perCall(calls)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f", name, us[name]))
	}
	return fmt.Sprintf("| %s | %d | %.0f | %s |\n", target, conc, total, strings.Join(parts, " · "))
}

// ticks returns the utime+stime of pid in clock ticks (0 when it is gone).
func ticks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var u, st int64
	if _, err := fmt.Sscan(f[11], &u); err != nil {
		return 0
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0
	}
	return u + st
}
