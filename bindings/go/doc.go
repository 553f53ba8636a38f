// Package gang gives Go programs process groups ("gangs") and the
// collectives of distributed training: all-reduce, all-gather(v),
// reduce-scatter(v), broadcast, gather, scatter, all-to-all(v), send/recv,
// barrier, and byte payloads of any size.
//
// A gang is a set of processes, each with a rank in [0, size). Launch N
// processes (gangrun, torchrun, SLURM, mpirun, or by hand with GANG_RANK,
// GANG_SIZE and GANG_INIT_METHOD=tcp://host:port) and in each:
//
//	g, err := gang.New(gang.Options{})   // rank and size from the environment
//	if err != nil { ... }
//	defer g.Close()
//	grad := []float32{1, 2, 3}
//	if err := gang.AllReduce(g, grad, gang.Avg); err != nil { ... }
//
// Collectives are generic functions over slices of any Number; every rank
// must issue the same operations in the same order. They block the calling
// goroutine (use goroutines for concurrency) and return an error, a *Error
// whose Status says what happened: errors.Is(err, gang.ErrTimeout),
// errors.Is(err, gang.ErrPeerLost) and so on. After an error from an issued
// operation (timeout, lost peer, mismatch, abort) the gang is failed and
// every later operation returns ErrAborted: close it.
//
// The package wraps the C library libgang (include/gang/gang.h) through a
// SWIG-generated package, gang.dev/gang/internal/capi. Each C call runs with its
// goroutine locked to an OS thread, so that the library's per-thread error
// message is read on the thread that failed.
package gang
