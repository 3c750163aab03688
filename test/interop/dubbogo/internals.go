package dubbogo

// What dubbo-go v3.3.1 offers no API for: stopping one provider's server and
// closing one consumer's connection. These helpers reach its private state by
// reflection and go:linkname; the layouts are pinned by the exact dubbo-go and
// getty versions in go.mod, and every step checks the types it finds and
// falls back (or does nothing) if they ever differ.

import (
	"net"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe" // go:linkname and reading unexported fields

	getty "github.com/apache/dubbo-getty"
	gxsync "github.com/dubbogo/gost/sync"

	dubboproto "dubbo.apache.org/dubbo-go/v3/protocol/dubbo"
	"dubbo.apache.org/dubbo-go/v3/remoting"
	gettyremoting "dubbo.apache.org/dubbo-go/v3/remoting/getty"
)

// stopDubboServer shuts down the getty server that DubboProtocol opened for
// location. DubboProtocol keeps its servers in a private map and only offers
// Destroy, which also destroys every consumer invoker of the process; so reach
// the map by reflection (the layout is pinned by the exact dubbo-go version)
// and fall back to Destroy if it ever changes.
func stopDubboServer(location string) {
	dp, ok := dubboproto.GetProtocol().(*dubboproto.DubboProtocol)
	if !ok {
		return
	}
	servers, ok := field[map[string]*remoting.ExchangeServer](dp, "serverMap")
	mu, ok2 := field[sync.Mutex](dp, "serverLock")
	if !ok || !ok2 {
		dp.Destroy()
		return
	}
	mu.Lock()
	s := (*servers)[location]
	delete(*servers, location)
	mu.Unlock()
	if s != nil {
		shutdownGettyServer(s)
	}
}

// shutdownGettyServer does what dubbo-go's Server.Stop leaves undone. Stop
// only closes the listener: the connections already accepted stay open, and
// the server's goroutine pool (one parked goroutine per request that ran
// concurrently, up to its size) is never closed. So collect the sessions and
// the pool first (private fields, by reflection; each step is skipped if the
// layout differs), then stop, then close the sessions and the pool.
func shutdownGettyServer(es *remoting.ExchangeServer) {
	gs, ok := es.Server.(*gettyremoting.Server)
	if !ok {
		es.Stop()
		return
	}
	var pool gxsync.GenericTaskPool
	if ts, ok := field[getty.Server](gs, "tcpServer"); ok && *ts != nil {
		pool = (*ts).GetTaskPool()
	}
	var sessions []getty.Session
	if h, ok := field[*gettyremoting.RpcServerHandler](gs, "rpcHandler"); ok && *h != nil {
		lock, ok := field[sync.RWMutex](*h, "rwlock")
		if mv, ok2 := fieldValue(*h, "sessionMap"); ok && ok2 && mv.Kind() == reflect.Map {
			lock.RLock()
			for _, k := range mv.MapKeys() {
				if s, ok := k.Interface().(getty.Session); ok {
					sessions = append(sessions, s)
				}
			}
			lock.RUnlock()
		}
	}
	es.Stop()
	for _, s := range sessions {
		s.Close()
	}
	if pool != nil {
		pool.Close()
	}
}

// field returns a pointer to the unexported field name of *obj if it has type
// T.
func field[T any](obj any, name string) (*T, bool) {
	v, ok := fieldValue(obj, name)
	if !ok || v.Type() != reflect.TypeFor[T]() {
		return nil, false
	}
	return (*T)(unsafe.Pointer(v.UnsafeAddr())), true
}

// fieldValue returns the field name of the struct *obj as a settable value,
// even if unexported.
func fieldValue(obj any, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, false
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), true
}

// dubbo-go's dubbo protocol shares one ExchangeClient (one getty client) per
// provider address among all consumers in the process, in this map.
//
//go:linkname dubboExchangeClients dubbo.apache.org/dubbo-go/v3/protocol/dubbo.exchangeClientMap
var dubboExchangeClients *sync.Map

// closeSharedConnection closes the getty TCP client under dubbo-go's shared
// ExchangeClient for location, and waits (up to 3s) until dubbo-go has
// noticed and reset its side; the ExchangeClient itself stays in dubbo-go's
// map, and its next request would dial again.
//
// Why not DubboInvoker.Destroy: when the last invoker of an address goes it
// closes the getty client from the calling goroutine, while the connection's
// reader goroutine, woken by that close, runs dubbo-go's own teardown; the two
// paths format the client struct with %#v and write its gettyClient field
// under different mutexes: data races inside dubbo-go, reported by -race.
// Closing the getty client from underneath (which also stops its reconnect
// loop: closing only the sockets makes getty reconnect) leaves the teardown to
// the reader goroutine alone.
func closeSharedConnection(location string) {
	if dubboExchangeClients == nil {
		return
	}
	v, ok := dubboExchangeClients.Load(location)
	if !ok {
		return
	}
	ec, ok := v.(*remoting.ExchangeClient)
	if !ok {
		return
	}
	cv, ok := fieldValue(ec, "client")
	if !ok || cv.Kind() != reflect.Interface {
		return
	}
	gc, ok := cv.Interface().(*gettyremoting.Client)
	if !ok || gc == nil {
		return
	}
	mu, ok := field[sync.RWMutex](gc, "gettyClientMux")
	if !ok {
		return
	}
	rpcField, ok := fieldValue(gc, "gettyClient")
	if !ok || rpcField.Kind() != reflect.Pointer {
		return
	}
	current := func() unsafe.Pointer {
		mu.RLock()
		defer mu.RUnlock()
		return rpcField.UnsafePointer()
	}
	p := current()
	if p == nil {
		return
	}
	rpc := reflect.NewAt(rpcField.Type().Elem(), p).Interface()
	lock, ok := field[sync.RWMutex](rpc, "lock")
	gv, ok2 := fieldValue(rpc, "gettyClient")
	if !ok || !ok2 || gv.Kind() != reflect.Interface {
		return
	}
	var conns []net.Conn
	lock.RLock()
	tcp, _ := gv.Interface().(getty.Client)
	if sv, ok := fieldValue(rpc, "sessions"); ok && sv.Kind() == reflect.Slice {
		for i := 0; i < sv.Len(); i++ {
			if e := sv.Index(i); e.Kind() == reflect.Pointer && !e.IsNil() {
				if s, ok := fieldValue(e.Interface(), "session"); ok {
					if ss, ok := s.Interface().(getty.Session); ok && ss != nil {
						if c := ss.Conn(); c != nil {
							conns = append(conns, c)
						}
					}
				}
			}
		}
	}
	lock.RUnlock()
	if tcp == nil {
		return
	}
	tcp.Close()
	// getty wakes the session's reader through its read deadline (1s); closing
	// the socket wakes it now. The client is closed, so it does not reconnect.
	for _, c := range conns {
		c.Close()
	}
	for deadline := time.Now().Add(3 * time.Second); current() != nil && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// hostPort extracts host:port from a dubbo:// URL.
func hostPort(url string) string {
	s := strings.TrimPrefix(url, "dubbo://")
	if i := strings.IndexAny(s, "/?"); i >= 0 {
		s = s[:i]
	}
	return s
}
