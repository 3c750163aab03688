package wasmfilter

import (
	"context"
	"sync"
)

// SharedData is proxy-wasm's shared data: key-value pairs, each with a
// compare-and-swap token, in one space per vm_id, shared by every instance
// of every filter of an App that names that vm_id (Envoy shares them per VM
// id across its worker threads; cpp-host's shared_data.cc). One per App,
// like Counters: never global.
type SharedData struct {
	mu  sync.Mutex
	vms map[string]*sharedVM
	cas uint32 // the last token handed out; 0 is never one

	queues queues // shared queues (pw_queue.go)
}

type sharedVM struct {
	kv    map[string]sharedValue
	bytes int // keys and values held
}

type sharedValue struct {
	v   []byte // never changed once stored: a set stores a new slice
	cas uint32
}

// Bounds of one vm_id's shared data: past them a set of a new key, or one
// that grows the total, fails with INTERNAL_FAILURE (a guest that floods
// the store cannot take the process's memory).
const (
	maxSharedKeys  = 4096
	maxSharedBytes = 4 << 20
)

// NewSharedData makes an empty store.
func NewSharedData() *SharedData { return &SharedData{vms: map[string]*sharedVM{}} }

// get returns key's value and token in vm's space.
func (s *SharedData) get(vm string, key []byte) ([]byte, uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, ok := s.vms[vm]
	if !ok {
		return nil, 0, false
	}
	v, ok := sv.kv[string(key)]
	return v.v, v.cas, ok
}

// set stores val under key in vm's space, with a new token; cas, when not
// 0, must be the key's current token (else CAS_MISMATCH: another instance
// wrote it since the guest read it). A key not stored yet takes any cas, as
// in cpp-host.
func (s *SharedData) set(vm string, key, val []byte, cas uint32) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, ok := s.vms[vm]
	if !ok {
		sv = &sharedVM{kv: map[string]sharedValue{}}
		s.vms[vm] = sv
	}
	old, exists := sv.kv[string(key)]
	if exists && cas != 0 && cas != old.cas {
		return pwCasMismatch
	}
	grow := len(val) - len(old.v)
	if !exists {
		if len(sv.kv) >= maxSharedKeys {
			return pwInternalFailure
		}
		grow += len(key)
	}
	if grow > 0 && sv.bytes+grow > maxSharedBytes {
		return pwInternalFailure
	}
	if s.cas++; s.cas == 0 {
		s.cas = 1
	}
	sv.kv[string(key)] = sharedValue{v: append([]byte(nil), val...), cas: s.cas}
	sv.bytes += grow
	return pwOK
}

// pwGetSharedData is proxy_get_shared_data(key_p, key_n, **val, *val_n,
// *cas).
func pwGetSharedData(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	key, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	v, cas, found := in.f.shared.get(in.f.vmID, key)
	if !found {
		s[0] = pwNotFound
		return
	}
	if st := pwWriteU32(in, uint32(s[4]), cas); st != pwOK {
		s[0] = st
		return
	}
	s[0] = pwReturn(in, ctx, uint32(s[2]), uint32(s[3]), v)
}

// pwSetSharedData is proxy_set_shared_data(key_p, key_n, val_p, val_n,
// cas).
func pwSetSharedData(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	key, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	val, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		s[0] = pwInvalidMemoryAccess
		return
	}
	s[0] = in.f.shared.set(in.f.vmID, key, val, uint32(s[4]))
}
