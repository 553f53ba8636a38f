package gang

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"unsafe"

	"gang.dev/gang/internal/capi"
)

// Number is the element type of a collective's slices. int and uint are
// their 64-bit forms; Float16 and BFloat16 carry 16-bit floats' bits; bool
// reduces with Sum and Max as "or", Prod and Min as "and" (Avg is
// unsupported).
type Number interface {
	~int8 | ~uint8 | ~int16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~int | ~uint |
		~float32 | ~float64 | Float16 | BFloat16 | ~bool
}

// Op is a reduction.
type Op int

// The reductions of gang.h. Floating reductions compute in at least
// float32; integer Sum and Prod wrap; Avg is for floating types only (an
// integer or bool Avg is ErrUnsupported: use Sum and divide).
const (
	Sum  Op = 0
	Prod Op = 1
	Min  Op = 2
	Max  Op = 3
	Avg  Op = 4
)

// dtype is gang.h's gang_dtype_t.
type dtype int

const (
	dtInt8     dtype = 0
	dtUint8    dtype = 1
	dtInt32    dtype = 2
	dtUint32   dtype = 3
	dtInt64    dtype = 4
	dtUint64   dtype = 5
	dtFloat16  dtype = 6
	dtBFloat16 dtype = 7
	dtFloat32  dtype = 8
	dtFloat64  dtype = 9
	dtBool     dtype = 10
	dtInt16    dtype = 11
)

// dtypeOf maps T to its gang dtype: the builtin types by a type switch,
// which the compiler resolves per instantiation, types defined on them by
// reflection.
func dtypeOf[T Number]() dtype {
	var zero T
	switch any(zero).(type) {
	case float64:
		return dtFloat64
	case float32:
		return dtFloat32
	case int64:
		return dtInt64
	case int32:
		return dtInt32
	case Float16:
		return dtFloat16
	case BFloat16:
		return dtBFloat16
	}
	switch reflect.TypeOf(zero).Kind() {
	case reflect.Bool:
		return dtBool
	case reflect.Int8:
		return dtInt8
	case reflect.Int16:
		return dtInt16
	case reflect.Uint8:
		return dtUint8
	case reflect.Int32:
		return dtInt32
	case reflect.Uint32:
		return dtUint32
	case reflect.Float32:
		return dtFloat32
	case reflect.Float64:
		return dtFloat64
	case reflect.Int, reflect.Int64:
		if unsafe.Sizeof(zero) == 4 {
			return dtInt32
		}
		return dtInt64
	default: // reflect.Uint, reflect.Uint64
		if unsafe.Sizeof(zero) == 4 {
			return dtUint32
		}
		return dtUint64
	}
}

// ptr is the address of x's first element, 0 for an empty slice. It is
// passed to C as an integer, which spares each call cgo's pointer checks;
// the caller keeps x alive across the call (runtime.KeepAlive), and Go
// memory does not move while C uses it: heap objects never move, and a
// goroutine's stack is neither grown nor shrunk while it is in a C call.
func ptr[T any](x []T) uintptr {
	if len(x) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&x[0]))
}

// collective checks g and runs one C call on it, under ctx (see Context).
func collective(ctx context.Context, g *Gang, f func(h capi.GangHandle) int) error {
	h, err := g.handle()
	if err != nil {
		return err
	}
	err = callContext(ctx, h, func() int { return f(h) })
	runtime.KeepAlive(g)
	return err
}

func checkLen(name, what string, have, want int) error {
	if have != want {
		return invalid(fmt.Sprintf("%s: %s has %d elements, want %d", name, what, have, want))
	}
	return nil
}

// sizes converts per-rank counts to size_t, checking there is one per rank.
func sizes(name string, g *Gang, counts []int) ([]uint64, int, error) {
	if g != nil && len(counts) != g.size {
		return nil, 0, invalid(fmt.Sprintf("%s: %d counts for a gang of size %d", name, len(counts), g.size))
	}
	out := make([]uint64, len(counts))
	total := 0
	for i, c := range counts {
		if c < 0 {
			return nil, 0, invalid(fmt.Sprintf("%s: negative count %d", name, c))
		}
		out[i] = uint64(c)
		total += c
	}
	return out, total, nil
}

// AllReduce reduces x over every rank with op, in place.
func AllReduce[T Number](g *Gang, x []T, op Op) error {
	return AllReduceContext(context.Background(), g, x, op)
}

// AllReduceContext is AllReduce under ctx (see Context).
func AllReduceContext[T Number](ctx context.Context, g *Gang, x []T, op Op) error {
	defer runtime.KeepAlive(x)
	dt, p := dtypeOf[T](), ptr(x)
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_all_reduce(h, p, p, int64(len(x)), int(dt), int(op), nil)
	})
}

// Reduce reduces x over every rank with op into root's x; the other ranks'
// x is left alone.
func Reduce[T Number](g *Gang, x []T, op Op, root int) error {
	return ReduceContext(context.Background(), g, x, op, root)
}

// ReduceContext is Reduce under ctx (see Context).
func ReduceContext[T Number](ctx context.Context, g *Gang, x []T, op Op, root int) error {
	defer runtime.KeepAlive(x)
	dt, p := dtypeOf[T](), ptr(x)
	recv := p
	if g != nil && g.rank != root {
		recv = 0
	}
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_reduce(h, p, recv, int64(len(x)), int(dt), int(op), root, nil)
	})
}

// Broadcast copies root's x into every rank's x.
func Broadcast[T Number](g *Gang, x []T, root int) error {
	return BroadcastContext(context.Background(), g, x, root)
}

// BroadcastContext is Broadcast under ctx (see Context).
func BroadcastContext[T Number](ctx context.Context, g *Gang, x []T, root int) error {
	defer runtime.KeepAlive(x)
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_broadcast(h, ptr(x), int64(len(x)), int(dt), root, nil)
	})
}

// AllGather sets dst (size*len(src) elements) to every rank's src, in rank
// order.
func AllGather[T Number](g *Gang, dst, src []T) error {
	return AllGatherContext(context.Background(), g, dst, src)
}

// AllGatherContext is AllGather under ctx (see Context).
func AllGatherContext[T Number](ctx context.Context, g *Gang, dst, src []T) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	if g != nil {
		if err := checkLen("AllGather", "dst", len(dst), g.size*len(src)); err != nil {
			return err
		}
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_all_gather(h, ptr(src), ptr(dst), int64(len(src)), int(dt), nil)
	})
}

// AllGatherV sets dst to every rank's src concatenated in rank order, rank
// r contributing counts[r] elements (len(src) == counts[rank]).
func AllGatherV[T Number](g *Gang, dst, src []T, counts []int) error {
	return AllGatherVContext(context.Background(), g, dst, src, counts)
}

// AllGatherVContext is AllGatherV under ctx (see Context).
func AllGatherVContext[T Number](ctx context.Context, g *Gang, dst, src []T, counts []int) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	c, total, err := sizes("AllGatherV", g, counts)
	if err != nil {
		return err
	}
	if err := checkLen("AllGatherV", "dst", len(dst), total); err != nil {
		return err
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_all_gatherv(h, ptr(src), int64(len(src)), ptr(dst), &c[0], int64(len(c)), int(dt), nil)
	})
}

// Gather sets root's dst (size*len(src) elements) to every rank's src in
// rank order; dst is ignored on the other ranks.
func Gather[T Number](g *Gang, dst, src []T, root int) error {
	return GatherContext(context.Background(), g, dst, src, root)
}

// GatherContext is Gather under ctx (see Context).
func GatherContext[T Number](ctx context.Context, g *Gang, dst, src []T, root int) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	if g != nil && g.rank == root {
		if err := checkLen("Gather", "dst", len(dst), g.size*len(src)); err != nil {
			return err
		}
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_gather(h, ptr(src), ptr(dst), int64(len(src)), int(dt), root, nil)
	})
}

// Scatter sets rank r's dst to chunk r of root's src (size*len(dst)
// elements); src is ignored on the other ranks.
func Scatter[T Number](g *Gang, dst, src []T, root int) error {
	return ScatterContext(context.Background(), g, dst, src, root)
}

// ScatterContext is Scatter under ctx (see Context).
func ScatterContext[T Number](ctx context.Context, g *Gang, dst, src []T, root int) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	if g != nil && g.rank == root {
		if err := checkLen("Scatter", "src", len(src), g.size*len(dst)); err != nil {
			return err
		}
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_scatter(h, ptr(src), ptr(dst), int64(len(dst)), int(dt), root, nil)
	})
}

// ReduceScatter sets rank r's dst to op over chunk r of every rank's src
// (size*len(dst) elements).
func ReduceScatter[T Number](g *Gang, dst, src []T, op Op) error {
	return ReduceScatterContext(context.Background(), g, dst, src, op)
}

// ReduceScatterContext is ReduceScatter under ctx (see Context).
func ReduceScatterContext[T Number](ctx context.Context, g *Gang, dst, src []T, op Op) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	if g != nil {
		if err := checkLen("ReduceScatter", "src", len(src), g.size*len(dst)); err != nil {
			return err
		}
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_reduce_scatter(h, ptr(src), ptr(dst), int64(len(dst)), int(dt), int(op), nil)
	})
}

// ReduceScatterV is ReduceScatter with chunk r of counts[r] elements: src
// holds sum(counts), dst counts[rank].
func ReduceScatterV[T Number](g *Gang, dst, src []T, counts []int, op Op) error {
	return ReduceScatterVContext(context.Background(), g, dst, src, counts, op)
}

// ReduceScatterVContext is ReduceScatterV under ctx (see Context).
func ReduceScatterVContext[T Number](ctx context.Context, g *Gang, dst, src []T, counts []int, op Op) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	c, total, err := sizes("ReduceScatterV", g, counts)
	if err != nil {
		return err
	}
	if err := checkLen("ReduceScatterV", "src", len(src), total); err != nil {
		return err
	}
	if g != nil {
		if err := checkLen("ReduceScatterV", "dst", len(dst), counts[g.rank]); err != nil {
			return err
		}
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_reduce_scatterv(h, ptr(src), ptr(dst), &c[0], int64(len(c)), int(dt), int(op), nil)
	})
}

// AllToAll sends chunk p of src (size equal chunks) to rank p, where it
// arrives as chunk `rank` of dst. dst and src have the same length.
func AllToAll[T Number](g *Gang, dst, src []T) error {
	return AllToAllContext(context.Background(), g, dst, src)
}

// AllToAllContext is AllToAll under ctx (see Context).
func AllToAllContext[T Number](ctx context.Context, g *Gang, dst, src []T) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	if err := checkLen("AllToAll", "dst", len(dst), len(src)); err != nil {
		return err
	}
	if g != nil && g.size > 0 && len(src)%g.size != 0 {
		return invalid(fmt.Sprintf("AllToAll: %d elements do not split into %d chunks", len(src), g.size))
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_all_to_all(h, ptr(src), ptr(dst), int64(len(src)/g.size), int(dt), nil)
	})
}

// AllToAllV sends sendCounts[p] elements of src to rank p and receives
// recvCounts[p] elements from rank p, packed in rank order into dst.
func AllToAllV[T Number](g *Gang, dst []T, recvCounts []int, src []T, sendCounts []int) error {
	return AllToAllVContext(context.Background(), g, dst, recvCounts, src, sendCounts)
}

// AllToAllVContext is AllToAllV under ctx (see Context).
func AllToAllVContext[T Number](ctx context.Context, g *Gang, dst []T, recvCounts []int, src []T, sendCounts []int) error {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	sc, sendTotal, err := sizes("AllToAllV", g, sendCounts)
	if err != nil {
		return err
	}
	rc, recvTotal, err := sizes("AllToAllV", g, recvCounts)
	if err != nil {
		return err
	}
	if err := checkLen("AllToAllV", "src", len(src), sendTotal); err != nil {
		return err
	}
	if err := checkLen("AllToAllV", "dst", len(dst), recvTotal); err != nil {
		return err
	}
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_all_to_allv(h, ptr(src), &sc[0], int64(len(sc)), ptr(dst), &rc[0], int64(len(rc)), int(dt), nil)
	})
}

// Send sends x to rank peer with a tag in [0, 2^31-1]; the receiver passes
// a slice of the same length and type, and the same tag. It may block until
// the peer receives: use Gang.Group for exchanges.
func Send[T Number](g *Gang, x []T, peer, tag int) error {
	return SendContext(context.Background(), g, x, peer, tag)
}

// SendContext is Send under ctx (see Context).
func SendContext[T Number](ctx context.Context, g *Gang, x []T, peer, tag int) error {
	defer runtime.KeepAlive(x)
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_send(h, ptr(x), int64(len(x)), int(dt), peer, tag, nil)
	})
}

// Recv receives into x what rank peer sent with tag.
func Recv[T Number](g *Gang, x []T, peer, tag int) error {
	return RecvContext(context.Background(), g, x, peer, tag)
}

// RecvContext is Recv under ctx (see Context).
func RecvContext[T Number](ctx context.Context, g *Gang, x []T, peer, tag int) error {
	defer runtime.KeepAlive(x)
	dt := dtypeOf[T]()
	return collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_recv(h, ptr(x), int64(len(x)), int(dt), peer, tag, nil)
	})
}

// RecvAny receives into x what the first rank to send with tag sent, with
// MPI's matching rules (one sender's messages in the order sent, receives
// in the order posted), and returns that rank. On gangs whose backend
// cannot (NCCL) it is ErrUnsupported.
func RecvAny[T Number](g *Gang, x []T, tag int) (int, error) {
	return RecvAnyContext(context.Background(), g, x, tag)
}

// RecvAnyContext is RecvAny under ctx (see Context).
func RecvAnyContext[T Number](ctx context.Context, g *Gang, x []T, tag int) (int, error) {
	defer runtime.KeepAlive(x)
	dt := dtypeOf[T]()
	sender := int32(-1)
	err := collective(ctx, g, func(h capi.GangHandle) int {
		return capi.Gang_recv_any(h, ptr(x), int64(len(x)), int(dt), tag, &sender, nil)
	})
	return int(sender), err
}
