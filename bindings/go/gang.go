package gang

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gang.dev/gang/internal/capi"
)

// Version is the version of gang this package belongs to (the library's
// major.minor names the newest ABI node it exports: GANG_0.3 for 0.3.x).
const Version = "0.4.0"

// LibraryVersion is the version of the libgang the program runs on.
func LibraryVersion() string { return capi.Gang_version_string() }

// Why collectives yield: Go's sysmon treats a goroutine that has not passed
// through the scheduler for 10 ms as long-running, and from then on takes
// the P of each of its blocking cgo calls away at once. That wakes a
// spinning thread, lets sysmon fall into deep sleep and wakes it again
// when the call returns: about 3.6 more context switches a call than C
// makes, and a collective of ~100 us over TCP 10-30% slower. A program
// whose main goroutine does nothing but collectives never passes through
// the scheduler, so each collective yields first when a millisecond has
// gone by since the last yield: the calls' cost and context switches then
// match C's (bindings/bench_overhead.sh).
// The clock is read every 8th call only: calls short enough for a clock
// read to show are far too short for the 10 ms to matter, and a yield 8
// calls late is at most 8 calls late.
var (
	epoch     = time.Now()
	lastYield atomic.Int64 // nanoseconds since epoch
	calls     atomic.Uint32
)

func yieldIfDue() {
	if calls.Add(1)&7 != 0 {
		return
	}
	now := int64(time.Since(epoch))
	if now-lastYield.Load() >= int64(time.Millisecond) {
		lastYield.Store(now)
		runtime.Gosched()
	}
}

// call runs one C call with the goroutine locked to its OS thread and, if
// it failed, reads the library's message for it on that same thread (the
// message is per thread, and goroutines move between threads).
func call(f func() int) error {
	runtime.LockOSThread()
	status := f()
	var err error
	if status < 0 {
		err = &Error{Status: Status(status), Msg: capi.Gang_last_error()}
	}
	runtime.UnlockOSThread()
	return err
}

// Options configure New. The zero value creates the gang the launcher's
// environment describes.
type Options struct {
	// Backend is "" or "auto" (on CPU: shared memory within a host, Gloo
	// across hosts, both where a job spans hosts with several ranks on
	// some; NCCL for CUDA), "shm", "gloo", "nccl", "fake" or a plugin's
	// name.
	Backend string
	// Device is "" or "cpu", "cuda" or "cuda:N".
	Device string
	// Rank and Size place this process; Size 0 reads both from the
	// environment (GANG_RANK/GANG_SIZE, torchrun, SLURM, Open MPI, PMI).
	Rank, Size int
	// InitMethod is "tcp://host:port" (rank 0 serves the store there),
	// "file:///dir", "memory://name" or torch's "env://" (the store at
	// MASTER_ADDR:MASTER_PORT); "" reads GANG_INIT_METHOD.
	InitMethod string
	// Timeout bounds every operation; 0 means GANG_TIMEOUT_MS, else 10 min.
	Timeout time.Duration
	// Name is shown in logs and errors; "" means "root".
	Name string
	// Debug checks that every rank issues the same operations
	// (ErrMismatch otherwise); false leaves it to GANG_DEBUG.
	Debug bool
}

// Gang is a group of processes that run collectives together. Its methods
// and the collectives may be called from any goroutine, but every rank
// must issue the same operations on it in the same order. Close it when
// done; a finalizer closes a forgotten one, as a safety net only.
type Gang struct {
	h     capi.GangHandle
	owner *Gangs // non-nil for the gangs of a Gangs: it frees them
	rank  int
	size  int
}

// newGang wraps a handle; owner is the Gangs it belongs to, or nil if the
// Gang owns it.
func newGang(handle uintptr, owner *Gangs) *Gang {
	h := capi.SwigcptrGangHandle(handle)
	g := &Gang{h: h, owner: owner, rank: capi.Gang_rank(h), size: capi.Gang_size(h)}
	if owner == nil {
		runtime.SetFinalizer(g, (*Gang).Close)
	}
	return g
}

// New creates the root gang. It is collective: every rank calls it with
// the same size, backend, name and rendezvous, and it returns once all
// have joined or the timeout passed.
func New(opts Options) (*Gang, error) {
	deviceType, deviceIndex, err := parseDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	rank, size := -1, -1
	if opts.Size > 0 {
		rank, size = opts.Rank, opts.Size
	}
	debug := 0
	if opts.Debug {
		debug = 1
	}
	var handle uintptr
	err = call(func() int {
		return capi.Gang_bind_create(opts.Backend, deviceType, deviceIndex, rank, size,
			opts.InitMethod, opts.Timeout.Milliseconds(), opts.Name, debug, &handle)
	})
	if err != nil {
		return nil, err
	}
	return newGang(handle, nil), nil
}

// Join asks to join the running gang opts.Name (default "root") as a new
// process (a replacement), through the job's store (opts.InitMethod, or the
// launch environment as New reads it), and blocks until its members admit
// it with Grow, or until opts.Timeout (then the request is withdrawn).
// opts.Rank and opts.Size are ignored: the members assign them.
func Join(opts Options) (*Gang, error) {
	deviceType, deviceIndex, err := parseDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	var handle uintptr
	err = call(func() int {
		return capi.Gang_bind_join(opts.Backend, deviceType, deviceIndex, opts.InitMethod,
			opts.Timeout.Milliseconds(), opts.Name, &handle)
	})
	if err != nil {
		return nil, err
	}
	return newGang(handle, nil), nil
}

// Fake returns a gang in which this process stands in for rank `rank` of
// `size` ranks that all hold its data, without traffic: AllReduce with Sum
// gives x*size, Avg/Min/Max give x, gathers repeat the input, Broadcast and
// Barrier do nothing; Send, Recv and Split are ErrUnsupported.
func Fake(rank, size int) (*Gang, error) {
	var handle uintptr
	if err := call(func() int { return capi.Gang_create_fake(rank, size, &handle) }); err != nil {
		return nil, err
	}
	return newGang(handle, nil), nil
}

func parseDevice(device string) (kind, index int, err error) {
	name, num, hasNum := strings.Cut(device, ":")
	switch name {
	case "", "cpu":
		kind = 0
	case "cuda":
		kind = 1
	default:
		return 0, 0, invalid(fmt.Sprintf("device %q: want \"cpu\", \"cuda\" or \"cuda:N\"", device))
	}
	index = -1
	if hasNum {
		if index, err = strconv.Atoi(num); err != nil || index < 0 {
			return 0, 0, invalid(fmt.Sprintf("device %q: bad device index", device))
		}
	}
	return kind, index, nil
}

// handle returns the C handle, or an error for a closed gang.
func (g *Gang) handle() (capi.GangHandle, error) {
	if g == nil || g.h == nil {
		return nil, invalid("use of a closed or nil Gang")
	}
	return g.h, nil
}

// Close frees the gang. It is local and bounded: it waits at most the
// gang's timeout for this rank's operations in flight and aborts the
// rest. Gangs split from it stay valid. Closing twice is a no-op; the
// gangs of a Gangs are closed by Gangs.Close. Close must not race with
// other calls on g.
func (g *Gang) Close() error {
	if g == nil || g.h == nil || g.owner != nil {
		return nil
	}
	h := g.h
	g.h = nil
	runtime.SetFinalizer(g, nil)
	return call(func() int { return capi.Gang_destroy(h) })
}

// Abort fails every operation in flight and later on this gang with
// ErrAborted, at once; peers see ErrPeerLost. The gang must still be closed.
func (g *Gang) Abort() error {
	h, err := g.handle()
	if err != nil {
		return err
	}
	err = call(func() int { return capi.Gang_abort(h) })
	runtime.KeepAlive(g)
	return err
}

// Rank is this process's rank in the gang.
func (g *Gang) Rank() int { return g.rank }

// Size is the number of ranks.
func (g *Gang) Size() int { return g.size }

// Name is the gang's name ("root", "root/split1.0", ...).
func (g *Gang) Name() string {
	h, err := g.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(g)
	return capi.Gang_name(h)
}

// Backend is the backend's name ("gloo", "fake").
func (g *Gang) Backend() string {
	h, err := g.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(g)
	return capi.Gang_backend_name(h)
}

// Ranks lists each member's rank in the root gang (the one New or Fake
// made), in this gang's rank order.
func (g *Gang) Ranks() []int {
	h, err := g.handle()
	if err != nil {
		return nil
	}
	defer runtime.KeepAlive(g)
	ranks := make([]int, g.size)
	for r := range ranks {
		ranks[r] = capi.Gang_root_rank(h, r)
	}
	return ranks
}

// Timeout is the time each operation may take, counted from its issue.
func (g *Gang) Timeout() time.Duration {
	h, err := g.handle()
	if err != nil {
		return 0
	}
	defer runtime.KeepAlive(g)
	return time.Duration(capi.Gang_get_timeout(h)) * time.Millisecond
}

// SetTimeout sets the timeout of operations issued afterwards.
func (g *Gang) SetTimeout(d time.Duration) error {
	h, err := g.handle()
	if err != nil {
		return err
	}
	err = call(func() int { return capi.Gang_set_timeout(h, d.Milliseconds()) })
	runtime.KeepAlive(g)
	return err
}

func (g *Gang) String() string {
	if g == nil || g.h == nil {
		return "gang.Gang(closed)"
	}
	return fmt.Sprintf("gang.Gang(%q rank=%d size=%d backend=%s)", g.Name(), g.rank, g.size, g.Backend())
}

// ColorNone is the Split color of ranks that join no new gang.
const ColorNone = -1

// Split partitions the gang like MPI_Comm_split: ranks passing the same
// color (>= 0) form a new gang, ordered by key, ties by rank. Collective
// over g. Ranks passing ColorNone get a nil *Gang.
func (g *Gang) Split(color, key int) (*Gang, error) {
	h, err := g.handle()
	if err != nil {
		return nil, err
	}
	var handle uintptr
	err = call(func() int { return capi.Gang_split(h, color, key, &handle) })
	runtime.KeepAlive(g)
	if err != nil || handle == 0 {
		return nil, err
	}
	return newGang(handle, nil), nil
}

// Shrink makes a gang of the survivors of g after a rank was lost (g may
// have failed): collective over the ranks still alive, which agree on one
// membership through g's store. The new gang ranks them in the order of
// their old ranks and is named "<base>/shrink<n>" (see gang_shrink); g
// stays failed. A rank that calls only after the others agreed gets an
// error saying it was excluded. timeout <= 0 means g's timeout.
func (g *Gang) Shrink(timeout time.Duration) (*Gang, error) {
	h, err := g.handle()
	if err != nil {
		return nil, err
	}
	var handle uintptr
	err = call(func() int { return capi.Gang_shrink(h, timeout.Milliseconds(), &handle) })
	runtime.KeepAlive(g)
	if err != nil || handle == 0 {
		return nil, err
	}
	return newGang(handle, nil), nil
}

// Grow admits the processes waiting in Join for this gang: a new gang of
// the members (first, in order) and the joiners, or nil when none waits.
// Collective over the members, at a point the program chooses; g stays
// usable. timeout <= 0 means g's timeout.
func (g *Gang) Grow(timeout time.Duration) (*Gang, error) {
	h, err := g.handle()
	if err != nil {
		return nil, err
	}
	var handle uintptr
	err = call(func() int { return capi.Gang_grow(h, timeout.Milliseconds(), &handle) })
	runtime.KeepAlive(g)
	if err != nil || handle == 0 {
		return nil, err
	}
	return newGang(handle, nil), nil
}

// Subgang creates a gang of the listed ranks of g, whose rank i is
// ranks[i]. Collective over g: every rank passes the same list. Ranks not
// listed get a nil *Gang.
func (g *Gang) Subgang(ranks []int) (*Gang, error) {
	h, err := g.handle()
	if err != nil {
		return nil, err
	}
	if len(ranks) == 0 {
		return nil, invalid("Subgang: no ranks")
	}
	cranks := make([]int32, len(ranks))
	for i, r := range ranks {
		cranks[i] = int32(r)
	}
	var handle uintptr
	err = call(func() int { return capi.Gang_create_subgang(h, &cranks[0], len(cranks), &handle) })
	runtime.KeepAlive(g)
	if err != nil || handle == 0 {
		return nil, err
	}
	return newGang(handle, nil), nil
}

// Barrier returns once every rank has entered it.
func (g *Gang) Barrier() error { return g.BarrierContext(context.Background()) }

// Group issues the operations f makes on g together, so that both sides
// of an exchange can Send before they Recv, and waits for all of them. f
// runs on the calling goroutine, which stays on one OS thread throughout:
// it must not hand operations on g to other goroutines.
func (g *Gang) Group(f func() error) error {
	h, err := g.handle()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := call(func() int { return capi.Gang_group_start(h) }); err != nil {
		return err
	}
	ferr := f()
	err = call(func() int { return capi.Gang_group_end(h, nil) })
	runtime.KeepAlive(g)
	if ferr != nil {
		return ferr
	}
	return err
}

// BroadcastFlag returns root's flag on every rank.
func (g *Gang) BroadcastFlag(flag bool, root int) (bool, error) {
	h, err := g.handle()
	if err != nil {
		return false, err
	}
	in, out := int32(0), int32(0)
	if flag {
		in = 1
	}
	err = call(func() int { return capi.Gang_broadcast_flag(h, int(in), root, &out) })
	runtime.KeepAlive(g)
	return out != 0, err
}

// AllSum returns the sum of every rank's value, the same on every rank.
func (g *Gang) AllSum(value float64) (float64, error) {
	h, err := g.handle()
	if err != nil {
		return 0, err
	}
	var out float64
	err = call(func() int { return capi.Gang_all_sum(h, value, &out) })
	runtime.KeepAlive(g)
	return out, err
}
