// Command overhead times a blocking 8-byte all-reduce (one float64, Sum)
// through the Go binding. Run it on 2 ranks (see bindings/bench_overhead.sh);
// rank 0 prints the mean time per call in microseconds, or with
// GANG_BENCH_MEDIAN set the median of the calls' times (over TCP, a few calls
// of milliseconds would swamp the mean). With GANG_BENCH_FAKE set it times a
// fake gang of 2 instead (one process, no traffic): the cost of the call
// itself. GANG_BENCH_BACKEND names the backend (default: auto).
//
//	overhead [iterations [warmup]]
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"gang.dev/gang"
)

func main() {
	iters, warmup := arg(1, 2000), arg(2, 200)
	var g *gang.Gang
	var err error
	if os.Getenv("GANG_BENCH_FAKE") != "" {
		g, err = gang.Fake(0, 2)
	} else {
		g, err = gang.New(gang.Options{Backend: os.Getenv("GANG_BENCH_BACKEND")})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer g.Close()
	x := []float64{1}
	for i := 0; i < warmup; i++ {
		must(gang.AllReduce(g, x, gang.Sum))
	}
	must(g.Barrier())
	var perCall float64 // microseconds
	if os.Getenv("GANG_BENCH_MEDIAN") != "" {
		times := make([]float64, iters)
		for i := range times {
			t := time.Now()
			must(gang.AllReduce(g, x, gang.Sum))
			times[i] = float64(time.Since(t).Nanoseconds()) / 1e3
		}
		sort.Float64s(times)
		perCall = times[iters/2]
	} else {
		start := time.Now()
		for i := 0; i < iters; i++ {
			must(gang.AllReduce(g, x, gang.Sum))
		}
		perCall = float64(time.Since(start).Nanoseconds()) / 1e3 / float64(iters)
	}
	if g.Rank() == 0 {
		fmt.Printf("go %d calls: %.3f us/call\n", iters, perCall)
	}
}

func arg(i, def int) int {
	if len(os.Args) > i {
		if n, err := strconv.Atoi(os.Args[i]); err == nil {
			return n
		}
	}
	return def
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
