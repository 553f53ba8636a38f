package gang

import (
	"context"
	"runtime"
	"unsafe"

	"gang.dev/gang/internal/capi"
)

// Byte payloads of any size, decided by the sender: for Go values the
// caller encodes (encoding/gob, encoding/json, ...).

// takeBytes copies n bytes of library memory into a new slice and frees
// the library's copy with gang_free.
func takeBytes(p unsafe.Pointer, n uint64) []byte {
	b := make([]byte, n)
	if n > 0 {
		copy(b, unsafe.Slice((*byte)(p), n))
	}
	capi.Gang_free(uintptr(p))
	return b
}

// BroadcastBytes returns root's data on every rank (data is ignored
// elsewhere).
func (g *Gang) BroadcastBytes(data []byte, root int) ([]byte, error) {
	defer runtime.KeepAlive(data)
	var out unsafe.Pointer
	var n uint64
	err := collective(context.Background(), g, func(h capi.GangHandle) int {
		return capi.Gang_broadcast_bytes(h, ptr(data), int64(len(data)), root, &out, &n)
	})
	if err != nil {
		return nil, err
	}
	return takeBytes(out, n), nil
}

// AllGatherBytes returns every rank's data, in rank order.
func (g *Gang) AllGatherBytes(data []byte) ([][]byte, error) {
	defer runtime.KeepAlive(data)
	h, err := g.handle()
	if err != nil {
		return nil, err
	}
	lens := make([]uint64, g.size)
	var out unsafe.Pointer
	err = call(func() int {
		return capi.Gang_all_gather_bytes(h, ptr(data), int64(len(data)), &out, &lens[0], int64(len(lens)))
	})
	runtime.KeepAlive(g)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, n := range lens {
		total += n
	}
	all := takeBytes(out, total)
	parts := make([][]byte, len(lens))
	for i, n := range lens {
		parts[i], all = all[:n:n], all[n:]
	}
	return parts, nil
}

// SendBytes sends data to rank peer with a tag; the receiver learns the
// length.
func (g *Gang) SendBytes(data []byte, peer, tag int) error {
	defer runtime.KeepAlive(data)
	return collective(context.Background(), g, func(h capi.GangHandle) int {
		return capi.Gang_send_bytes(h, ptr(data), int64(len(data)), peer, tag)
	})
}

// RecvBytes receives what rank peer sent with SendBytes and tag.
func (g *Gang) RecvBytes(peer, tag int) ([]byte, error) {
	var out unsafe.Pointer
	var n uint64
	err := collective(context.Background(), g, func(h capi.GangHandle) int {
		return capi.Gang_recv_bytes(h, peer, tag, &out, &n)
	})
	if err != nil {
		return nil, err
	}
	return takeBytes(out, n), nil
}
