package gang

import (
	"math"
	"runtime"
	"sort"

	"gang.dev/gang/internal/capi"
)

// Axis names one parallelism of a Gangs.
type Axis int

// The axes of gang.h: data, tensor, pipeline, context and expert
// parallelism, expert-data, FSDP shard and replicate, model (tp x pp) and
// dp x cp.
const (
	AxisRoot Axis = 0
	AxisDP   Axis = 1
	AxisTP   Axis = 2
	AxisPP   Axis = 3
	AxisCP   Axis = 4
	AxisEP   Axis = 5
	AxisEDP  Axis = 6
	AxisSDP  Axis = 7
	AxisRDP  Axis = 8
	AxisMP   Axis = 9
	AxisDPCP Axis = 10
)

// String is the axis's short name ("dp", "tp", ...).
func (a Axis) String() string { return capi.Gang_axis_name(int(a)) }

// ParallelConfig gives the degrees of parallelism; zero fields keep the
// defaults: 1, DP = size/(TP*CP*PP), SDP = DP*CP (full shard), Order
// "tp-cp-pp-dp" (dense axes, fastest-varying first; "tp-cp-dp-pp" is
// Megatron-LM's layout).
type ParallelConfig struct {
	TP, PP, CP, EP int
	DP, SDP        int
	Order          string
}

// Gangs holds the gang of every axis, carved from Root by SplitParallel
// or SplitAfterLoss. Axes with the same members share one *Gang. From
// SplitParallel, Root is the gang that was split, which Gangs does not
// own, and Close frees the others; from SplitAfterLoss, Root is the new
// gang of the active ranks, and Close frees it too.
type Gangs struct {
	Root, DP, TP, PP, CP, EP, EDP, SDP, RDP, MP, DPCP *Gang

	h capi.GangsHandle
}

// SplitParallel builds every axis's gang from root. Collective over root:
// every rank passes the same configuration (ErrMismatch otherwise). A
// configuration that does not fit is ErrInvalidArgument naming the sizes,
// and root stays usable.
func SplitParallel(root *Gang, cfg ParallelConfig) (*Gangs, error) {
	h, err := root.handle()
	if err != nil {
		return nil, err
	}
	var handle uintptr
	err = call(func() int {
		return capi.Gang_bind_split_parallel(h, cfg.TP, cfg.CP, cfg.PP, cfg.DP, cfg.EP, cfg.SDP, cfg.Order, &handle)
	})
	runtime.KeepAlive(root)
	if err != nil {
		return nil, err
	}
	gs := &Gangs{Root: root, h: capi.SwigcptrGangsHandle(handle)}
	gs.fill(h.Swigcptr())
	return gs, nil
}

// fill sets the axes other than Root from the gangs_t, one *Gang per
// distinct handle; rootHandle is Root's.
func (gs *Gangs) fill(rootHandle uintptr) {
	byHandle := map[uintptr]*Gang{rootHandle: gs.Root}
	get := func(axis Axis) *Gang {
		axisHandle := capi.Gangs_get(gs.h, int(axis)).Swigcptr()
		g, ok := byHandle[axisHandle]
		if !ok {
			g = newGang(axisHandle, gs)
			byHandle[axisHandle] = g
		}
		return g
	}
	gs.DP, gs.TP, gs.PP, gs.CP = get(AxisDP), get(AxisTP), get(AxisPP), get(AxisCP)
	gs.EP, gs.EDP, gs.SDP, gs.RDP = get(AxisEP), get(AxisEDP), get(AxisSDP), get(AxisRDP)
	gs.MP, gs.DPCP = get(AxisMP), get(AxisDPCP)
	runtime.SetFinalizer(gs, (*Gangs).Close)
}

// Get returns the gang of an axis, nil for an unknown axis.
func (gs *Gangs) Get(axis Axis) *Gang {
	switch axis {
	case AxisRoot:
		return gs.Root
	case AxisDP:
		return gs.DP
	case AxisTP:
		return gs.TP
	case AxisPP:
		return gs.PP
	case AxisCP:
		return gs.CP
	case AxisEP:
		return gs.EP
	case AxisEDP:
		return gs.EDP
	case AxisSDP:
		return gs.SDP
	case AxisRDP:
		return gs.RDP
	case AxisMP:
		return gs.MP
	case AxisDPCP:
		return gs.DPCP
	}
	return nil
}

// Close frees the gangs SplitParallel made (not Root), or all of them,
// Root included, for SplitAfterLoss; they become unusable. Closing twice
// is a no-op.
func (gs *Gangs) Close() error {
	if gs == nil || gs.h == nil {
		return nil
	}
	for _, g := range []*Gang{gs.Root, gs.DP, gs.TP, gs.PP, gs.CP, gs.EP, gs.EDP, gs.SDP, gs.RDP, gs.MP, gs.DPCP} {
		if g.owner == gs {
			g.h = nil
		}
	}
	h := gs.h
	gs.h = nil
	runtime.SetFinalizer(gs, nil)
	return call(func() int { return capi.Gangs_destroy(h) })
}

// Layout returns the ranks of rank's gang on axis in a gang of size ranks,
// in gang-rank order: the layout SplitParallel builds, computed without
// processes.
func Layout(size int, cfg ParallelConfig, axis Axis, rank int) ([]int, error) {
	if size <= 0 {
		return nil, invalid("Layout: size must be positive")
	}
	ranks := make([]int32, size)
	var n uint64
	err := call(func() int {
		return capi.Gang_bind_layout_ranks(size, cfg.TP, cfg.CP, cfg.PP, cfg.DP, cfg.EP, cfg.SDP, cfg.Order,
			int(axis), rank, &ranks[0], int64(len(ranks)), &n)
	})
	if err != nil {
		return nil, err
	}
	out := make([]int, n)
	for i := range out {
		out[i] = int(ranks[i])
	}
	return out, nil
}

// AfterLoss is the layout after a loss (LayoutAfterLoss): the new
// configuration (only DP differs from the old one, and is always set), the
// old ranks that go on in new-rank order (new rank i was old rank
// Active[i]) and the survivors set aside, ascending.
type AfterLoss struct {
	Config ParallelConfig
	Active []int
	Spares []int
}

// LayoutAfterLoss computes, without processes, the largest layout of cfg's
// degrees that the survivors (old ranks, in any order) of a gang of size
// ranks still fit (gang.h, "After a lost rank"): the data-parallel
// replicas (the TP*CP*PP ranks of one dp coordinate) that survived whole
// go on, DP lowered to their count (and further if EP or SDP must divide
// DP*CP, dropping the highest replicas); the other survivors are spares.
// ErrInvalidArgument for a bad configuration, a survivor out of range or
// listed twice, or when no replica survived whole.
func LayoutAfterLoss(size int, cfg ParallelConfig, survivors []int) (AfterLoss, error) {
	alive := make([]int32, len(survivors)+1) // never empty: &alive[0]
	for i, r := range survivors {
		if r < math.MinInt32 || r > math.MaxInt32 {
			return AfterLoss{}, invalid("LayoutAfterLoss: a survivor is out of range")
		}
		alive[i] = int32(r)
	}
	active := make([]int32, len(survivors)+1)
	var n uint64
	err := call(func() int {
		return capi.Gang_bind_layout_after_loss(size, cfg.TP, cfg.CP, cfg.PP, cfg.DP, cfg.EP, cfg.SDP, cfg.Order,
			&alive[0], len(survivors), &active[0], int64(len(survivors)), &n)
	})
	if err != nil {
		return AfterLoss{}, err
	}
	out := AfterLoss{Config: cfg, Active: make([]int, n), Spares: []int{}}
	kept := make(map[int]bool, n)
	for i := range out.Active {
		out.Active[i] = int(active[i])
		kept[out.Active[i]] = true
	}
	for _, r := range survivors {
		if !kept[r] {
			out.Spares = append(out.Spares, r)
		}
	}
	sort.Ints(out.Spares)
	model := 1
	for _, d := range []int{cfg.TP, cfg.CP, cfg.PP} {
		if d > 0 {
			model *= d
		}
	}
	out.Config.DP = int(n) / model
	return out, nil
}

// SplitAfterLoss carves the gangs of the layout after a loss
// (LayoutAfterLoss). Collective over shrunk, the gang old.Shrink made;
// every rank passes its own old gang (which may have failed: only its rank
// and size are read) and the configuration old was laid out by, the same
// on every rank (ErrMismatch otherwise). A rank that goes on gets Gangs
// whose Root is a new gang of the active ranks in new-rank order, which
// the Gangs owns: Close frees it with the others. A spare gets nil, nil;
// it stays a member of shrunk, as the active ranks do, so the program
// decides whether it waits there or exits.
func SplitAfterLoss(old, shrunk *Gang, cfg ParallelConfig) (*Gangs, error) {
	oh, err := old.handle()
	if err != nil {
		return nil, err
	}
	sh, err := shrunk.handle()
	if err != nil {
		return nil, err
	}
	var handle uintptr
	err = call(func() int {
		return capi.Gang_bind_split_after_loss(oh, sh, cfg.TP, cfg.CP, cfg.PP, cfg.DP, cfg.EP, cfg.SDP, cfg.Order, &handle)
	})
	runtime.KeepAlive(old)
	runtime.KeepAlive(shrunk)
	if err != nil || handle == 0 {
		return nil, err
	}
	gs := &Gangs{h: capi.SwigcptrGangsHandle(handle)}
	rootHandle := capi.Gangs_get(gs.h, int(AxisRoot)).Swigcptr()
	gs.Root = newGang(rootHandle, gs)
	gs.fill(rootHandle)
	return gs, nil
}
