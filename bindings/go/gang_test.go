package gang_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"gang.dev/gang"
	"gang.dev/gang/internal/capi"
)

func init() {
	workers["collectives"] = collectives
	workers["dtypes"] = dtypes
	workers["bytes"] = byteCollectives
	workers["rejected"] = rejectedBeforeTraffic
	workers["killed"] = peerKilled
	workers["late"] = latePeer
	workers["split"] = split
	workers["afterLoss"] = afterLoss
}

func newGang() *gang.Gang {
	g, err := gang.New(gang.Options{Timeout: 60 * time.Second})
	must(err)
	return g
}

func expect[T any](what string, got, want T) {
	if !reflect.DeepEqual(got, want) {
		fatalf("%s: got %v, want %v", what, got, want)
	}
}

func iota(n int, f func(i int) int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func collectives() error {
	g := newGang()
	defer g.Close()
	r, n := g.Rank(), g.Size()
	sum := n * (n + 1) / 2

	x := []float32{float32(r + 1), 1}
	must(gang.AllReduce(g, x, gang.Sum))
	expect("AllReduce Sum", x, []float32{float32(sum), float32(n)})
	for _, c := range []struct {
		op   gang.Op
		want float64
	}{{gang.Max, float64(n)}, {gang.Min, 1}, {gang.Avg, float64(n+1) / 2}, {gang.Prod, float64(factorial(n))}} {
		y := []float64{float64(r + 1)}
		must(gang.AllReduce(g, y, c.op))
		expect(fmt.Sprintf("AllReduce op %d", c.op), y[0], c.want)
	}

	z := []int64{int64(r + 1)}
	must(gang.Reduce(g, z, gang.Sum, n-1))
	if r == n-1 {
		expect("Reduce at root", z[0], int64(sum))
	} else {
		expect("Reduce elsewhere", z[0], int64(r+1))
	}

	b := []int32{int32(r), int32(r)}
	must(gang.Broadcast(g, b, n-1))
	expect("Broadcast", b, []int32{int32(n - 1), int32(n - 1)})

	all := make([]int, 2*n)
	must(gang.AllGather(g, all, []int{r, -r}))
	expect("AllGather", all, iota(2*n, func(i int) int { return (i / 2) * (1 - 2*(i%2)) }))

	counts := iota(n, func(p int) int { return p + 1 })
	v := make([]uint8, sum)
	must(gang.AllGatherV(g, v, bytes.Repeat([]byte{byte(r)}, r+1), counts))
	want := []uint8{}
	for p := 0; p < n; p++ {
		want = append(want, bytes.Repeat([]byte{byte(p)}, p+1)...)
	}
	expect("AllGatherV", v, want)

	var gathered []int32
	if r == 0 {
		gathered = make([]int32, n)
	}
	must(gang.Gather(g, gathered, []int32{int32(10 * r)}, 0))
	if r == 0 {
		expect("Gather", gathered, []int32(int32s(iota(n, func(p int) int { return 10 * p }))))
	}

	chunk := make([]float64, 2)
	var src []float64
	if r == n-1 {
		src = make([]float64, 2*n)
		for i := range src {
			src[i] = float64(i)
		}
	}
	must(gang.Scatter(g, chunk, src, n-1))
	expect("Scatter", chunk, []float64{float64(2 * r), float64(2*r + 1)})

	rs := make([]int64, 1)
	must(gang.ReduceScatter(g, rs, int64s(iota(n, func(p int) int { return p + r })), gang.Sum))
	expect("ReduceScatter", rs[0], int64(n*r+n*(n-1)/2))

	rsv := make([]int32, r+1)
	must(gang.ReduceScatterV(g, rsv, int32s(iota(sum, func(int) int { return r + 1 })), counts, gang.Max))
	expect("ReduceScatterV", rsv, int32s(iota(r+1, func(int) int { return n })))

	a2a := make([]int, n)
	must(gang.AllToAll(g, a2a, iota(n, func(p int) int { return 10*r + p })))
	expect("AllToAll", a2a, iota(n, func(p int) int { return 10*p + r }))

	// AllToAllV: rank r sends p+1 copies of r to rank p.
	var send []int
	for p := 0; p < n; p++ {
		send = append(send, iota(p+1, func(int) int { return r })...)
	}
	recv := make([]int, n*(r+1))
	must(gang.AllToAllV(g, recv, iota(n, func(int) int { return r + 1 }), send, counts))
	expect("AllToAllV", recv, iota(n*(r+1), func(i int) int { return i / (r + 1) }))

	if n > 1 { // a ring exchange: a group lets every rank send first
		in := make([]float32, 3)
		must(g.Group(func() error {
			if err := gang.Send(g, []float32{float32(r), 1, 2}, (r+1)%n, 5); err != nil {
				return err
			}
			return gang.Recv(g, in, (r+n-1)%n, 5)
		}))
		expect("Send/Recv", in, []float32{float32((r + n - 1) % n), 1, 2})

		// Rank 0 receives from whichever rank sends first, once from each.
		if r == 0 {
			seen := map[int]bool{}
			for i := 1; i < n; i++ {
				got := make([]int64, 2)
				from, err := gang.RecvAny(g, got, 7)
				must(err)
				expect("RecvAny's payload", got, []int64{int64(from), 7})
				seen[from] = true
			}
			expect("RecvAny's senders", len(seen), n-1)
		} else {
			must(gang.Send(g, []int64{int64(r), 7}, 0, 7))
		}
	}

	must(g.Barrier())
	flag, err := g.BroadcastFlag(r == n-1, n-1)
	must(err)
	expect("BroadcastFlag", flag, true)
	total, err := g.AllSum(float64(r) + 0.5)
	must(err)
	expect("AllSum", total, float64(n*n)/2)
	expect("Ranks", g.Ranks(), iota(n, func(p int) int { return p }))
	must(gang.AllReduce(g, []float32{}, gang.Sum)) // count 0 is still a collective
	return nil
}

// dtypes: every element type through AllReduce on 3 ranks.
func dtypes() error {
	g := newGang()
	defer g.Close()
	r := g.Rank()
	check := func(what string, err error, ok bool) {
		must(err)
		if !ok {
			fatalf("%s: wrong result", what)
		}
	}
	i8 := []int8{100, int8(-r)}
	err := gang.AllReduce(g, i8, gang.Sum)
	check("int8 wraps", err, i8[0] == 44 && i8[1] == -3) // 300 mod 256
	u8 := []uint8{uint8(r)}
	err = gang.AllReduce(g, u8, gang.Max)
	check("uint8", err, u8[0] == 2)
	i32 := []int32{int32(-1 + r)} // no integer mean: refused, left alone
	err = gang.AllReduce(g, i32, gang.Avg)
	check("int32 avg refused", nil, errors.Is(err, gang.ErrUnsupported) && i32[0] == int32(-1+r))
	u32 := []uint32{math.MaxUint32 - uint32(r)}
	err = gang.AllReduce(g, u32, gang.Min)
	check("uint32", err, u32[0] == math.MaxUint32-2)
	i64 := []int64{1 << 40}
	err = gang.AllReduce(g, i64, gang.Sum)
	check("int64", err, i64[0] == 3<<40)
	u64 := []uint64{1<<63 + uint64(r)}
	err = gang.AllReduce(g, u64, gang.Max)
	check("uint64", err, u64[0] == 1<<63+2)
	type meters float64 // named types work through ~float64
	m := []meters{1.5}
	err = gang.AllReduce(g, m, gang.Sum)
	check("named float64", err, m[0] == 4.5)
	f16 := []gang.Float16{gang.NewFloat16(0.5 * float32(r+1)), gang.NewFloat16(-1)}
	err = gang.AllReduce(g, f16, gang.Sum)
	check("float16", err, f16[0].Float32() == 3 && f16[1].Float32() == -3)
	bf := []gang.BFloat16{gang.NewBFloat16(float32(r) + 0.25)}
	err = gang.AllReduce(g, bf, gang.Sum)
	check("bfloat16", err, bf[0].Float32() == 3.75)
	u := []uint{uint(r)}
	err = gang.AllReduce(g, u, gang.Prod)
	check("uint", err, u[0] == 0)
	return nil
}

func byteCollectives() error {
	g := newGang()
	defer g.Close()
	r, n := g.Rank(), g.Size()
	var msg []byte
	if r == 1 {
		msg = bytes.Repeat([]byte("gang"), 50000)
	}
	got, err := g.BroadcastBytes(msg, 1)
	must(err)
	expect("BroadcastBytes", got, bytes.Repeat([]byte("gang"), 50000))
	parts, err := g.AllGatherBytes(bytes.Repeat([]byte{'a' + byte(r)}, r))
	must(err)
	for p, part := range parts {
		expect(fmt.Sprintf("AllGatherBytes[%d]", p), part, bytes.Repeat([]byte{'a' + byte(p)}, p))
	}
	if r == 0 {
		must(g.SendBytes([]byte("to the last"), n-1, 9))
	} else if r == n-1 {
		got, err := g.RecvBytes(0, 9)
		must(err)
		expect("RecvBytes", string(got), "to the last")
	}
	empty, err := g.BroadcastBytes(nil, 0)
	must(err)
	expect("empty BroadcastBytes", len(empty), 0)
	return nil
}

// rejectedBeforeTraffic: bad arguments fail on rank 0 alone, and the ranks
// still agree afterwards.
func rejectedBeforeTraffic() error {
	g := newGang()
	defer g.Close()
	if g.Rank() == 0 {
		err := gang.AllGather(g, make([]float32, 3), []float32{1, 2}) // dst too short
		if !errors.Is(err, gang.ErrInvalidArgument) {
			fatalf("AllGather with a short dst: %v", err)
		}
		err = gang.Broadcast(g, []int32{1}, 7) // root out of range, found by the library
		var e *gang.Error
		if !errors.As(err, &e) || e.Status != gang.StatusInvalidArgument || !errors.Is(err, gang.ErrInvalidArgument) {
			fatalf("Broadcast to root 7: %v", err)
		}
		if !bytes.Contains([]byte(e.Msg), []byte("out of range")) || e.Status.String() != "GANG_ERR_INVALID_ARGUMENT" {
			fatalf("message %q, status %v", e.Msg, e.Status)
		}
	}
	x := []float64{float64(g.Rank() + 1)}
	must(gang.AllReduce(g, x, gang.Sum))
	expect("after rejections", x[0], 3.0)
	return nil
}

const failureTimeout = 5 * time.Second

func peerKilled() error {
	g, err := gang.New(gang.Options{Timeout: failureTimeout})
	must(err)
	defer g.Close()
	x := []float32{1, 2, 3}
	must(gang.AllReduce(g, x, gang.Sum))
	if g.Rank() == g.Size()-1 {
		time.Sleep(500 * time.Millisecond) // let the others enter the all-reduce
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	start := time.Now()
	err = gang.AllReduce(g, x, gang.Sum)
	elapsed := time.Since(start)
	if !errors.Is(err, gang.ErrPeerLost) && !errors.Is(err, gang.ErrTimeout) {
		fatalf("AllReduce with a killed peer: %v", err)
	}
	if elapsed > failureTimeout+2*time.Second {
		fatalf("the error took %v", elapsed)
	}
	if err := g.Barrier(); !errors.Is(err, gang.ErrAborted) {
		fatalf("Barrier on a failed gang: %v", err)
	}
	return nil
}

// afterLoss: 4 ranks of tp=2 (replicas [0,1] [2,3]); rank 3 is killed, the
// survivors shrink and carve the layout of the whole replica, [0,1]; rank
// 2 is a spare.
func afterLoss() error {
	g, err := gang.New(gang.Options{Timeout: failureTimeout})
	must(err)
	defer g.Close()
	x := []float32{1, 2, 3}
	must(gang.AllReduce(g, x, gang.Sum))
	r := g.Rank()
	if r == 3 {
		time.Sleep(500 * time.Millisecond) // let the others enter the all-reduce
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if err := gang.AllReduce(g, x, gang.Sum); err == nil {
		fatalf("AllReduce with a killed peer succeeded")
	}
	small, err := g.Shrink(0)
	must(err)
	defer small.Close()
	gs, err := gang.SplitAfterLoss(g, small, gang.ParallelConfig{TP: 2})
	must(err)
	expect("a spare gets no gangs", gs == nil, r == 2)
	if gs != nil {
		expect("active ranks", gs.Root.Ranks(), []int{0, 1})
		expect("rank in the active gang", gs.Root.Rank(), r)
		expect("tp spans the active gang", gs.TP == gs.Root && gs.DP.Size() == 1, true)
		y := []int{r + 1}
		must(gang.AllReduce(gs.TP, y, gang.Sum))
		expect("AllReduce over tp", y[0], 3)
		must(gs.Close())
		expect("Close frees the root", gs.Root.Barrier() != nil, true)
	}
	must(small.Barrier()) // the spare is still in the shrunk gang
	return nil
}

func latePeer() error {
	g, err := gang.New(gang.Options{Timeout: time.Second})
	must(err)
	defer g.Close()
	if g.Rank() == 1 {
		time.Sleep(3 * time.Second)
	}
	start := time.Now()
	err = gang.AllReduce(g, []int32{1}, gang.Sum)
	if g.Rank() == 0 {
		var e *gang.Error
		if !errors.Is(err, gang.ErrTimeout) || !errors.As(err, &e) || !e.Timeout() {
			fatalf("AllReduce with a late peer: %v", err)
		}
		if time.Since(start) > 3*time.Second {
			fatalf("the timeout took %v", time.Since(start))
		}
	} else if err == nil {
		fatalf("the late rank's AllReduce succeeded")
	}
	return nil
}

func split() error {
	root := newGang()
	defer root.Close()
	r := root.Rank()
	half, err := root.Split(r%2, -r)
	must(err)
	expect("Split ranks", half.Ranks(), []int{r%2 + 2, r % 2})
	x := []int{r}
	must(gang.AllReduce(half, x, gang.Sum))
	expect("AllReduce on a split", x[0], 2*(r%2)+2)
	must(half.Close())
	color := 1
	if r == 0 {
		color = gang.ColorNone
	}
	rest, err := root.Split(color, 0)
	must(err)
	expect("ColorNone gives nil", rest == nil, r == 0)
	if rest != nil {
		expect("Split size", rest.Size(), 3)
		must(rest.Close())
	}
	odd, err := root.Subgang([]int{1, 3})
	must(err)
	expect("Subgang membership", odd != nil, r%2 == 1)
	if odd != nil {
		must(odd.Barrier())
		must(odd.Close())
	}

	gs, err := gang.SplitParallel(root, gang.ParallelConfig{TP: 2})
	must(err)
	expect("tp ranks", gs.TP.Ranks(), []int{r &^ 1, r | 1})
	expect("dp ranks", gs.DP.Ranks(), []int{r % 2, r%2 + 2})
	expect("shared handles", gs.DPCP == gs.DP && gs.MP == gs.TP && gs.Root == root, true)
	expect("Get", gs.Get(gang.AxisTP) == gs.TP, true)
	layout, err := gang.Layout(4, gang.ParallelConfig{TP: 2}, gang.AxisDP, r)
	must(err)
	expect("Layout matches", layout, gs.DP.Ranks())
	y := []float64{float64(r)}
	must(gang.AllReduce(gs.TP, y, gang.Sum))
	expect("AllReduce on tp", y[0], float64(2*(r&^1)+1))
	must(gs.Close())
	if err := gs.TP.Barrier(); !errors.Is(err, gang.ErrInvalidArgument) {
		fatalf("a closed Gangs' gang: %v", err)
	}
	must(root.Barrier()) // rank 0 serves the store: it stays until the others are done
	return nil
}

func TestCollectives(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) { runRanks(t, n, "collectives", true) })
	}
}

func TestDtypes(t *testing.T) { runRanks(t, 3, "dtypes", true) }

func TestBytes(t *testing.T) { runRanks(t, 3, "bytes", true) }

func TestRejectedBeforeTraffic(t *testing.T) { runRanks(t, 2, "rejected", true) }

func TestPeerKilled(t *testing.T) {
	results := runRanks(t, 3, "killed", false)
	for _, res := range results[:2] {
		if res.err != nil {
			t.Errorf("rank %d: %v\n%s", res.rank, res.err, res.output)
		}
	}
	if ws, ok := exitStatus(results[2].err); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the killed rank ended with %v", results[2].err)
	}
}

func TestSplitAfterLoss(t *testing.T) {
	results := runRanks(t, 4, "afterLoss", false)
	for _, res := range results[:3] {
		if res.err != nil {
			t.Errorf("rank %d: %v\n%s", res.rank, res.err, res.output)
		}
	}
	if ws, ok := exitStatus(results[3].err); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the killed rank ended with %v", results[3].err)
	}
}

func TestLayoutAfterLoss(t *testing.T) {
	// gang.h's example: 8 ranks, tp=2, rank 3 lost.
	got, err := gang.LayoutAfterLoss(8, gang.ParallelConfig{TP: 2}, []int{7, 6, 5, 4, 2, 1, 0})
	want := gang.AfterLoss{Config: gang.ParallelConfig{TP: 2, DP: 3}, Active: []int{0, 1, 4, 5, 6, 7}, Spares: []int{2}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("LayoutAfterLoss: %+v %v, want %+v", got, err, want)
	}
	// Megatron's order, 12 ranks tp=2 pp=2: replica {2,3,8,9} broken.
	cfg := gang.ParallelConfig{TP: 2, PP: 2, Order: "tp-cp-dp-pp"}
	got, err = gang.LayoutAfterLoss(12, cfg, []int{0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11})
	cfg.DP = 2
	want = gang.AfterLoss{Config: cfg, Active: []int{0, 1, 4, 5, 6, 7, 10, 11}, Spares: []int{2, 8, 9}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("LayoutAfterLoss Megatron: %+v %v, want %+v", got, err, want)
	}
	// SDP=2 must divide DP: 7 whole replicas, 6 kept.
	got, err = gang.LayoutAfterLoss(8, gang.ParallelConfig{SDP: 2}, []int{0, 1, 2, 3, 4, 6, 7})
	if err != nil || got.Config.DP != 6 || !reflect.DeepEqual(got.Spares, []int{7}) {
		t.Errorf("LayoutAfterLoss sdp=2: %+v %v", got, err)
	}
	for _, survivors := range [][]int{{0, 3}, {}, {0, 0}, {9}} {
		if _, err := gang.LayoutAfterLoss(4, gang.ParallelConfig{TP: 2}, survivors); !errors.Is(err, gang.ErrInvalidArgument) {
			t.Errorf("LayoutAfterLoss %v: %v", survivors, err)
		}
	}
}

func TestLatePeerTimesOut(t *testing.T) { runRanks(t, 2, "late", true) }

func TestSplit(t *testing.T) { runRanks(t, 4, "split", true) }

func TestFake(t *testing.T) {
	g, err := gang.Fake(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	x := []float32{1, 2}
	if err := gang.AllReduce(g, x, gang.Sum); err != nil || x[0] != 3 || x[1] != 6 {
		t.Errorf("Fake AllReduce: %v %v", x, err)
	}
	all := make([]int64, 6)
	if err := gang.AllGather(g, all, []int64{4, 5}); err != nil || !reflect.DeepEqual(all, []int64{4, 5, 4, 5, 4, 5}) {
		t.Errorf("Fake AllGather: %v %v", all, err)
	}
	s := []int16{-3, 7}
	if err := gang.AllReduce(g, s, gang.Sum); err != nil || s[0] != -9 || s[1] != 21 {
		t.Errorf("Fake AllReduce int16: %v %v", s, err)
	}
	b := []bool{true, false}
	if err := gang.AllReduce(g, b, gang.Max); err != nil || !b[0] || b[1] {
		t.Errorf("Fake AllReduce bool: %v %v", b, err)
	}
	if err := gang.AllReduce(g, b, gang.Avg); !errors.Is(err, gang.ErrUnsupported) {
		t.Errorf("Fake AllReduce bool Avg: %v", err)
	}
	if err := gang.Send(g, x, 0, 0); !errors.Is(err, gang.ErrUnsupported) {
		t.Errorf("Fake Send: %v", err)
	}
	if g.Rank() != 1 || g.Size() != 3 || g.Backend() != "fake" || g.Name() != "root" {
		t.Errorf("Fake identity: %v", g)
	}
	gs, err := gang.SplitParallel(g, gang.ParallelConfig{TP: 3})
	if err != nil || gs.TP.Size() != 3 || gs.DP.Size() != 1 {
		t.Fatalf("Fake SplitParallel: %v", err)
	}
	gs.Close()
	if _, err := gang.SplitParallel(g, gang.ParallelConfig{TP: 2}); !errors.Is(err, gang.ErrInvalidArgument) {
		t.Errorf("SplitParallel tp=2 of 3: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Error(err)
	}
	if err := g.Barrier(); !errors.Is(err, gang.ErrInvalidArgument) || g.Close() != nil {
		t.Errorf("a closed gang: %v", err)
	}
}

// TestLastErrorPerThread: many goroutines fail at once, each with its own
// message; each must read its own (the calls lock their OS thread).
func TestLastErrorPerThread(t *testing.T) {
	g, err := gang.Fake(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(root int) {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				err := gang.Broadcast(g, []float32{1}, root)
				want := fmt.Sprintf("root %d is out of range", root)
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
					t.Errorf("goroutine %d got %v", root, err)
					return
				}
			}
		}(100 + i)
	}
	wg.Wait()
}

func TestLayoutAndAxes(t *testing.T) {
	cfg := gang.ParallelConfig{TP: 2, PP: 2}
	for _, c := range []struct {
		axis gang.Axis
		want []int
	}{{gang.AxisTP, []int{4, 5}}, {gang.AxisPP, []int{5, 7}}, {gang.AxisDP, []int{1, 5}}, {gang.AxisRoot, iota(8, func(i int) int { return i })}} {
		got, err := gang.Layout(8, cfg, c.axis, 5)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Layout %v: %v %v, want %v", c.axis, got, err, c.want)
		}
	}
	if _, err := gang.Layout(8, gang.ParallelConfig{TP: 3}, gang.AxisTP, 0); !errors.Is(err, gang.ErrInvalidArgument) {
		t.Errorf("Layout tp=3 of 8: %v", err)
	}
	if gang.AxisDPCP.String() != "dpcp" || gang.AxisTP.String() != "tp" {
		t.Errorf("axis names %v %v", gang.AxisDPCP, gang.AxisTP)
	}
}

func TestFloat16(t *testing.T) {
	for _, f := range []float32{0, 1, -2, 0.5, 65504, 6.1035156e-05, 5.9604645e-08, 0.099975586} {
		if got := gang.NewFloat16(f).Float32(); got != f {
			t.Errorf("float16 round trip of %v gave %v", f, got)
		}
	}
	cases := map[float32]gang.Float16{1: 0x3c00, -2: 0xc000, 65520: 0x7c00, 1e-9: 0, 1.0009766: 0x3c01, 1.00048828125: 0x3c00}
	for f, want := range cases {
		if got := gang.NewFloat16(f); got != want {
			t.Errorf("NewFloat16(%v) = %#x, want %#x", f, got, want)
		}
	}
	if !math.IsNaN(float64(gang.NewFloat16(float32(math.NaN())).Float32())) {
		t.Error("NaN lost")
	}
	if b := gang.NewBFloat16(1.5); b != 0x3fc0 || b.Float32() != 1.5 {
		t.Errorf("NewBFloat16(1.5) = %#x", b)
	}
	if b := gang.NewBFloat16(1.00390625); b != 0x3f80 { // a tie rounds to even
		t.Errorf("NewBFloat16 tie = %#x", b)
	}
}

// TestConstantsMatchTheHeader: the package's constants are gang.h's values.
func TestConstantsMatchTheHeader(t *testing.T) {
	pairs := []struct{ got, want int }{
		{int(gang.StatusTimeout), int(capi.GANG_ERR_TIMEOUT)}, {int(gang.StatusPeerLost), int(capi.GANG_ERR_PEER_LOST)},
		{int(gang.StatusAborted), int(capi.GANG_ERR_ABORTED)}, {int(gang.StatusInternal), int(capi.GANG_ERR_INTERNAL)},
		{int(gang.StatusInvalidArgument), int(capi.GANG_ERR_INVALID_ARGUMENT)}, {int(gang.StatusStore), int(capi.GANG_ERR_STORE)},
		{int(gang.Sum), int(capi.GANG_SUM)}, {int(gang.Prod), int(capi.GANG_PROD)}, {int(gang.Min), int(capi.GANG_MIN)},
		{int(gang.Max), int(capi.GANG_MAX)}, {int(gang.Avg), int(capi.GANG_AVG)},
		{int(gang.AxisDP), int(capi.GANG_AXIS_DP)}, {int(gang.AxisDPCP), int(capi.GANG_AXIS_DPCP)},
		{gang.ColorNone, int(capi.GANG_COLOR_NONE)},
	}
	for i, p := range pairs {
		if p.got != p.want {
			t.Errorf("constant %d: %d, header says %d", i, p.got, p.want)
		}
	}
}

func TestDetectEnv(t *testing.T) {
	for k, v := range map[string]string{"GANG_RANK": "2", "GANG_SIZE": "4", "GANG_LOCAL_RANK": "0", "GANG_LOCAL_SIZE": "2"} {
		t.Setenv(k, v)
	}
	env, err := gang.DetectEnv()
	if err != nil || env.Source != "gang" || env.Rank != 2 || env.Size != 4 || env.LocalSize != 2 {
		t.Errorf("DetectEnv: %+v %v", env, err)
	}
	t.Setenv("GANG_RANK", "9")
	if _, err := gang.DetectEnv(); !errors.Is(err, gang.ErrInvalidArgument) {
		t.Errorf("DetectEnv with rank 9 of 4: %v", err)
	}
}

func TestErrorsOfSingleCalls(t *testing.T) {
	if _, err := gang.New(gang.Options{Device: "cuda", Size: 1}); !errors.Is(err, gang.ErrUnavailable) {
		t.Errorf("a CUDA gang: %v", err)
	}
	if _, err := gang.New(gang.Options{Backend: "nope", Size: 1}); !errors.Is(err, gang.ErrInvalidArgument) {
		t.Errorf("an unknown backend: %v", err)
	}
	if _, err := gang.New(gang.Options{Device: "tpu"}); !errors.Is(err, gang.ErrInvalidArgument) {
		t.Errorf("an unknown device: %v", err)
	}
	url := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	if _, err := gang.New(gang.Options{Rank: 1, Size: 2, InitMethod: url, Timeout: time.Second}); !errors.Is(err, gang.ErrStore) {
		t.Errorf("an unreachable store: %v", err)
	}
}

func factorial(n int) int {
	if n <= 1 {
		return 1
	}
	return n * factorial(n-1)
}

func int32s(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

func int64s(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func exitStatus(err error) (syscall.WaitStatus, bool) {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return 0, false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ws, ok
}

// The package and the library it runs on are the same release.
func TestVersion(t *testing.T) {
	if got := gang.LibraryVersion(); got != gang.Version {
		t.Fatalf("libgang is %s, the Go package %s", got, gang.Version)
	}
}
