package gang_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"gang.dev/gang"
)

func init() {
	workers["cancel"] = cancelWorker
	workers["deadline"] = deadlineWorker
}

// cancelWorker: rank 0 waits in a receive nobody satisfies under a context
// cancelled after 300 ms; the cancel aborts the gang, so the receive ends
// with context.Canceled at once, and rank 1, waiting for rank 0 in its own
// receive (timeout 30 s), fails with ErrPeerLost well before its timeout.
func cancelWorker() error {
	g, err := gang.New(gang.Options{Timeout: 30 * time.Second})
	must(err)
	defer g.Close()
	x := []float64{0}
	if g.Rank() == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		err := gang.RecvContext(ctx, g, x, 1, 0)
		took := time.Since(start)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, gang.ErrAborted) {
			fatalf("RecvContext after cancel: %v", err)
		}
		if took > 2*time.Second {
			fatalf("RecvContext ended %v after it began; the cancel came at 300 ms", took)
		}
		// The gang is failed from then on.
		if err := gang.AllReduce(g, x, gang.Sum); !errors.Is(err, gang.ErrAborted) {
			fatalf("AllReduce after the abort: %v", err)
		}
		return nil
	}
	start := time.Now()
	err = gang.Recv(g, x, 0, 0)
	if !errors.Is(err, gang.ErrPeerLost) || time.Since(start) > 10*time.Second {
		fatalf("the peer's Recv: %v after %v", err, time.Since(start))
	}
	return nil
}

// deadlineWorker: contexts with deadlines, and the gang's own timeout, give
// errors that match os.ErrDeadlineExceeded and context.DeadlineExceeded; a
// context done before the call issues nothing and leaves the gang usable.
func deadlineWorker() error {
	g, err := gang.New(gang.Options{Timeout: 30 * time.Second})
	must(err)
	defer g.Close()
	x := []float64{float64(g.Rank() + 1)}
	// Background and an undone context cost nothing and work.
	must(gang.AllReduceContext(context.Background(), g, x, gang.Sum))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	must(gang.AllReduceContext(ctx, g, x, gang.Sum))
	must(g.BarrierContext(ctx))
	cancel()
	expect("sum of sums", x[0], 6.0)
	// Done before the call: nothing sent, the gang still works.
	err = gang.AllReduceContext(ctx, g, x, gang.Sum)
	if !errors.Is(err, context.Canceled) {
		fatalf("AllReduceContext with a done context: %v", err)
	}
	must(g.Barrier())
	// The gang's own timeout: a short one, rank 1 late.
	must(g.SetTimeout(500 * time.Millisecond))
	if g.Rank() == 1 {
		time.Sleep(3 * time.Second)
		return nil
	}
	err = gang.AllReduce(g, x, gang.Sum)
	var ge *gang.Error
	if !errors.As(err, &ge) || !errors.Is(err, os.ErrDeadlineExceeded) ||
		!errors.Is(err, context.DeadlineExceeded) || !os.IsTimeout(err) {
		fatalf("the gang's timeout: %v", err)
	}
	return nil
}

func TestContextCancelAborts(t *testing.T) { runRanks(t, 2, "cancel", true) }

func TestDeadlines(t *testing.T) { runRanks(t, 2, "deadline", true) }

// A context deadline during a call: single process, a fake gang cannot
// block, so a receive on a 2-rank gang whose peer never sends stands in.
func TestContextDeadline(t *testing.T) {
	runRanks(t, 2, "ctxdeadline", true)
}

func init() {
	workers["ctxdeadline"] = func() error {
		g, err := gang.New(gang.Options{Timeout: 30 * time.Second})
		must(err)
		defer g.Close()
		x := []int16{1}
		if g.Rank() == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := gang.RecvContext(ctx, g, x, 1, 0)
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) ||
				!os.IsTimeout(err) {
				fatalf("RecvContext past its deadline: %v", err)
			}
			return nil
		}
		_ = gang.Recv(g, x, 0, 0) // ends when rank 0 aborts
		return nil
	}
}
