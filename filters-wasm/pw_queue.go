package wasmfilter

import (
	"context"
	"sync"
)

// Shared queues (proxy-wasm): a filter registers a named queue in its
// vm_id's space; any filter of the App enqueues into it by id (after
// proxy_resolve_shared_queue by vm_id and name); the registering filter
// hears proxy_on_queue_ready(root, id) on one of its instances and
// dequeues. Bounded: at most maxQueues queues per App and maxQueueItems
// items each (past it an enqueue answers INTERNAL_FAILURE), items at most
// maxQueueItem bytes.
const (
	maxQueues     = 1024
	maxQueueItems = 1024
	maxQueueItem  = 64 << 10
)

type sharedQueue struct {
	owner *Filter // the filter that registered it, told when items come
	items [][]byte
}

type queues struct {
	mu     sync.Mutex
	byName map[string]uint32 // vm_id NUL name -> id
	byID   map[uint32]*sharedQueue
	last   uint32
}

func (q *queues) register(f *Filter, vm, name string) (uint32, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := vm + "\x00" + name
	if id, ok := q.byName[key]; ok {
		q.byID[id].owner = f // registered again (a new instance): same queue
		return id, pwOK
	}
	if len(q.byID) >= maxQueues {
		return 0, pwInternalFailure
	}
	if q.byName == nil {
		q.byName, q.byID = map[string]uint32{}, map[uint32]*sharedQueue{}
	}
	q.last++
	q.byName[key] = q.last
	q.byID[q.last] = &sharedQueue{owner: f}
	return q.last, pwOK
}

func (q *queues) resolve(vm, name string) (uint32, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	id, ok := q.byName[vm+"\x00"+name]
	return id, ok
}

func (q *queues) enqueue(id uint32, item []byte) (*Filter, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sq, ok := q.byID[id]
	switch {
	case !ok:
		return nil, pwNotFound
	case len(sq.items) >= maxQueueItems || len(item) > maxQueueItem:
		return nil, pwInternalFailure
	}
	sq.items = append(sq.items, append([]byte(nil), item...))
	return sq.owner, pwOK
}

func (q *queues) dequeue(id uint32) ([]byte, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sq, ok := q.byID[id]
	switch {
	case !ok:
		return nil, pwNotFound
	case len(sq.items) == 0:
		return nil, pwEmpty
	}
	item := sq.items[0]
	sq.items[0] = nil
	sq.items = sq.items[1:]
	return item, pwOK
}

func pwRegisterQueue(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	name, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	id, st := in.f.shared.queues.register(in.f, in.f.vmID, string(name))
	if st != pwOK {
		s[0] = st
		return
	}
	s[0] = pwWriteU32(in, uint32(s[2]), id)
}

func pwResolveQueue(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	vm, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	name, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		s[0] = pwInvalidMemoryAccess
		return
	}
	id, found := in.f.shared.queues.resolve(string(vm), string(name))
	if !found {
		s[0] = pwNotFound
		return
	}
	s[0] = pwWriteU32(in, uint32(s[4]), id)
}

func pwEnqueue(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	item, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = pwInvalidMemoryAccess
		return
	}
	owner, st := in.f.shared.queues.enqueue(uint32(s[0]), item)
	if st == pwOK && owner != nil {
		owner.queueReady(uint32(s[0]))
	}
	s[0] = st
}

func pwDequeue(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil || in.pw == nil {
		s[0] = pwNotFound
		return
	}
	item, st := in.f.shared.queues.dequeue(uint32(s[0]))
	if st != pwOK {
		s[0] = st
		return
	}
	s[0] = pwReturn(in, ctx, uint32(s[1]), uint32(s[2]), item)
}

// queueReady tells the filter that queue id has an item: its queue worker
// (started on the first) runs proxy_on_queue_ready on one of its
// instances. Notices for one queue coalesce while one is pending: the guest
// dequeues until EMPTY.
func (f *Filter) queueReady(id uint32) {
	if f.closed.Load() || f.tickStop == nil {
		return
	}
	f.queueOnce.Do(func() {
		f.queueCh = make(chan uint32, maxQueues)
		f.background(f.queueLoop)
	})
	f.queueMu.Lock()
	if f.queuePending == nil {
		f.queuePending = map[uint32]bool{}
	}
	pending := f.queuePending[id]
	f.queuePending[id] = true
	f.queueMu.Unlock()
	if !pending {
		select {
		case f.queueCh <- id:
		default: // more queues pending than a filter can register: dropped
			f.queueMu.Lock()
			delete(f.queuePending, id)
			f.queueMu.Unlock()
		}
	}
}

func (f *Filter) queueLoop() {
	for {
		var id uint32
		select {
		case <-f.tickStop:
			return
		case id = <-f.queueCh:
		}
		f.queueMu.Lock()
		delete(f.queuePending, id)
		f.queueMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		v := f.host.cur.Load()
		in, err := v.get(ctx)
		cancel()
		if err != nil {
			continue
		}
		in.f = f // the queue's owner (vm.go)
		if err := in.queueReadyCall(id); err != nil {
			v.discard(in)
			continue
		}
		v.put(in)
	}
}

// queueReadyCall runs the queue-ready callback of the filter's ABI on in:
// proxy_on_queue_ready(root, id), or weft_on_queue_ready(id) (weft ABI
// v1.1, caps_weft_queue.go).
func (in *instance) queueReadyCall(id uint32) error {
	if in.pw == nil {
		return in.weftQueueReady(id)
	}
	_, err := in.pwCall(context.Background(), in.pw.onQueueReady, pwOnQueueReady, in.f.rootCtx, id)
	return err
}
