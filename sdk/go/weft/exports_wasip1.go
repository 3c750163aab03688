//go:build wasip1

package weft

import "unsafe"

// The guest exports of ABI v1. They live here, in package weft, so that a
// filter's package main only registers handlers; weft_on_response, optional,
// is in package onresponse.

//go:wasmexport weft_abi_version
func exportABIVersion() int32 { return ABIVersion }

//go:wasmexport weft_alloc
func exportAlloc(size int32) uint32 {
	if size < 0 || int64(size) > maxAlloc {
		return 0
	}
	n := max(size, 1) // a real, non-zero address even for 0 bytes
	b := make([]byte, n)
	// The host writes into b after this returns, and the guest reads it when
	// the host function that asked for it returns: keep b reachable until
	// the current callback ends (see release).
	pinned = append(pinned, b)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

//go:wasmexport weft_on_request
func exportOnRequest() int32 { return int32(dispatch(false)) }

// weft_on_tick (ABI v1.1): the host calls it after SetTickPeriod.
//
//go:wasmexport weft_on_tick
func exportOnTick() {
	defer release()
	if onTick != nil {
		onTick()
	}
}

// weft_on_queue_ready (ABI v1.1): the host calls it when a queue the filter
// registered has items.
//
//go:wasmexport weft_on_queue_ready
func exportOnQueueReady(id uint32) {
	defer release()
	if onQueueReady != nil {
		onQueueReady(Queue(id))
	}
}

// take returns the n bytes at guest address ptr, which the host wrote into a
// buffer weft_alloc gave it during the current callback, as a string sharing
// that buffer (no copy: nothing writes to it again).
func take(ptr, n uint32) string {
	if n == 0 {
		return ""
	}
	for i := len(pinned) - 1; i >= 0; i-- {
		b := pinned[i]
		base := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		if ptr >= base && uint64(ptr)+uint64(n) <= uint64(base)+uint64(len(b)) {
			return unsafe.String(&b[ptr-base], n)
		}
	}
	panic("weft: the host returned " + itoa(int64(n)) + " bytes at " + itoa(int64(ptr)) +
		", outside every buffer weft_alloc gave it in this callback")
}
