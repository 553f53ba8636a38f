package gang_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Multi-rank tests re-execute the test binary once per rank. TestMain sees
// GANG_TEST_WORKER in a rank's environment and runs that worker instead of
// the tests; the worker reads GANG_RANK, GANG_SIZE and GANG_INIT_METHOD
// through gang.New like any launched program.

// workers are the rank bodies, by name. A worker fails its rank by
// returning an error (or through fatalf).
var workers = map[string]func() error{}

func TestMain(m *testing.M) {
	if name := os.Getenv("GANG_TEST_WORKER"); name != "" {
		worker, ok := workers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no worker %q\n", name)
			os.Exit(2)
		}
		if err := worker(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv("GANG_RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fatalf ends a rank with a message (workers have no *testing.T).
func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rank %s: %s\n", os.Getenv("GANG_RANK"), fmt.Sprintf(format, args...))
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

type rankResult struct {
	rank   int
	err    error // from Wait: nil, or an *exec.ExitError
	output string
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runRanks runs worker `name` on n ranks and returns how each ended; with
// check, it fails the test unless every rank exited 0.
func runRanks(t *testing.T, n int, name string, check bool) []rankResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	env := append(os.Environ(),
		"GANG_TEST_WORKER="+name,
		fmt.Sprintf("GANG_SIZE=%d", n),
		fmt.Sprintf("GANG_INIT_METHOD=tcp://127.0.0.1:%d", freePort(t)))
	cmds := make([]*exec.Cmd, n)
	outputs := make([]strings.Builder, n)
	for r := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(env, fmt.Sprintf("GANG_RANK=%d", r))
		cmd.Stdout, cmd.Stderr = &outputs[r], &outputs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	results := make([]rankResult, n)
	for r, cmd := range cmds {
		err := cmd.Wait()
		results[r] = rankResult{rank: r, err: err, output: outputs[r].String()}
	}
	if check {
		for _, res := range results {
			if res.err != nil {
				t.Errorf("rank %d: %v\n%s", res.rank, res.err, res.output)
			}
		}
	}
	return results
}
