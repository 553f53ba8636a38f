package gang

import (
	"context"
	"runtime"
	"sync/atomic"

	"gang.dev/gang/internal/capi"
)

// Context
//
// Every collective has a ...Context variant (AllReduceContext,
// BarrierContext, ...) that runs it under a context.Context:
//
//   - A context already done when the call starts fails it before anything
//     is sent: the error wraps ctx.Err() and the gang stays usable.
//   - A context done while the call runs aborts the gang (Abort), so that
//     the call, and the same operation on every peer (which see
//     ErrPeerLost), fail at once. The error is an *Error with
//     StatusAborted wrapping ctx.Err(): errors.Is(err, context.Canceled),
//     or for a deadline errors.Is(err, context.DeadlineExceeded) and
//     errors.Is(err, os.ErrDeadlineExceeded). The gang is failed from
//     then on: close it.
//
// The gang's own timeout (Options.Timeout, SetTimeout) still bounds every
// operation; it fails with ErrTimeout, which also matches
// os.ErrDeadlineExceeded and context.DeadlineExceeded. A context that can
// never be done (context.Background) costs nothing.

// callContext runs one C call on gang h under ctx.
func callContext(ctx context.Context, h capi.GangHandle, f func() int) error {
	yieldIfDue()
	if ctx == nil {
		return call(f)
	}
	done := ctx.Done()
	if done == nil {
		return call(f)
	}
	if err := ctx.Err(); err != nil {
		return contextError(StatusInvalidArgument, "not issued", err)
	}
	finished := make(chan struct{})
	watched := make(chan struct{})
	var aborted int32
	go func() {
		defer close(watched)
		select {
		case <-done:
			atomic.StoreInt32(&aborted, 1)
			_ = call(func() int { return capi.Gang_abort(h) })
		case <-finished:
		}
	}()
	err := call(f)
	close(finished)
	<-watched
	if err != nil && atomic.LoadInt32(&aborted) == 1 {
		return contextError(StatusAborted, "the gang was aborted", ctx.Err())
	}
	return err
}

// contextError is the error of a call ended by its context.
func contextError(status Status, what string, cause error) error {
	return &Error{Status: status, Msg: what + ": " + cause.Error(), cause: cause}
}

// BarrierContext is Barrier under ctx (see Context).
func (g *Gang) BarrierContext(ctx context.Context) error {
	h, err := g.handle()
	if err != nil {
		return err
	}
	err = callContext(ctx, h, func() int { return capi.Gang_barrier(h, nil) })
	runtime.KeepAlive(g)
	return err
}
