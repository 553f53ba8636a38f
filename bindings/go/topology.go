package gang

import (
	"runtime"

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

// Gangs holds the gang of every axis, carved from Root by SplitParallel.
// Axes with the same members share one *Gang; Root is the gang that was
// split, which Gangs does not own. Close frees the others.
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
	byHandle := map[uintptr]*Gang{h.Swigcptr(): root}
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
	return gs, nil
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

// Close frees the gangs SplitParallel made (not Root); they become
// unusable. Closing twice is a no-op.
func (gs *Gangs) Close() error {
	if gs == nil || gs.h == nil {
		return nil
	}
	for _, g := range []*Gang{gs.DP, gs.TP, gs.PP, gs.CP, gs.EP, gs.EDP, gs.SDP, gs.RDP, gs.MP, gs.DPCP} {
		if g != gs.Root {
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
