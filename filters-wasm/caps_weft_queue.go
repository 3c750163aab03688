package wasmfilter

import (
	"context"
)

// Shared queues for weft-ABI filters (ABI v1.1, sdk/ABI.md "Capabilities
// (v1.1)"), on proxy-wasm's implementation (pw_queue.go): the same queues
// by vm_id and name across the App's filters of both ABIs, the same bounds,
// the same worker telling the registering filter, which runs
// weft_on_queue_ready(queue_id) on one of its idle instances.

// hQueueRegister is queue_register(name_ptr, name_len, id_ptr): registers
// the queue name in the filter's vm_id space (again: the same queue, this
// filter now told of its items) and writes its id.
func (in *instance) hQueueRegister(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	name, ok := in.read(uint32(s[0]), uint32(s[1]))
	if !ok || uint64(uint32(s[2]))+4 > uint64(in.mem.Size()) {
		s[0] = statusBadArgument
		return
	}
	id, st := in.f.shared.queues.register(in.f, in.f.vmID, string(name))
	if st != pwOK {
		s[0] = statusLimit // maxQueues per App
		return
	}
	in.mem.WriteUint32Le(uint32(s[2]), id)
	s[0] = statusOK
}

// hQueueResolve is queue_resolve(vm_ptr, vm_len, name_ptr, name_len,
// id_ptr): the id of the queue name that a filter of vm_id registered;
// NOT_FOUND when none has.
func (in *instance) hQueueResolve(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	vm, ok1 := in.read(uint32(s[0]), uint32(s[1]))
	name, ok2 := in.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 || uint64(uint32(s[4]))+4 > uint64(in.mem.Size()) {
		s[0] = statusBadArgument
		return
	}
	id, found := in.f.shared.queues.resolve(string(vm), string(name))
	if !found {
		s[0] = statusNotFound
		return
	}
	in.mem.WriteUint32Le(uint32(s[4]), id)
	s[0] = statusOK
}

// hQueueEnqueue is queue_enqueue(queue_id, data_ptr, data_len): appends a
// copy of the bytes; the registering filter is told (weft_on_queue_ready
// or proxy_on_queue_ready). BAD_ARGUMENT for an id no queue has, LIMIT
// when the queue is full or the item too large.
func (in *instance) hQueueEnqueue(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	item, ok := in.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = statusBadArgument
		return
	}
	owner, st := in.f.shared.queues.enqueue(uint32(s[0]), item)
	switch st {
	case pwOK:
		if owner != nil {
			owner.queueReady(uint32(s[0]))
		}
		s[0] = statusOK
	case pwNotFound:
		s[0] = statusBadArgument
	default:
		s[0] = statusLimit
	}
}

// hQueueDequeue is queue_dequeue(queue_id, ret_ptr_ptr, ret_len_ptr): the
// oldest item, removed; NOT_FOUND when the queue is empty, BAD_ARGUMENT for
// an id no queue has.
func (in *instance) hQueueDequeue(ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = statusNotFound
		return
	}
	size := uint64(in.mem.Size())
	if uint64(uint32(s[1]))+4 > size || uint64(uint32(s[2]))+4 > size {
		// Checked before the item leaves the queue: a status other
		// than OK has done nothing.
		s[0] = statusBadArgument
		return
	}
	item, st := in.f.shared.queues.dequeue(uint32(s[0]))
	switch st {
	case pwOK:
	case pwEmpty:
		s[0] = statusNotFound
		return
	default:
		s[0] = statusBadArgument
		return
	}
	s[0] = uint64(in.returnBytes(ctx, uint32(s[1]), uint32(s[2]), item))
}

// weftQueueReady runs weft_on_queue_ready(queue_id) on in, idle, under the
// filter's timeout, when the module exports it; a guest that fails in it
// costs its instance, as in a tick.
func (in *instance) weftQueueReady(id uint32) error {
	fn := in.mod.ExportedFunction(exportOnQueueReady)
	if fn == nil {
		return nil
	}
	in.stack[0] = uint64(id)
	_, err := in.call(context.Background(), fn, exportOnQueueReady)
	return err
}
