package nacos

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/weftrpc/weft/extension"
)

// naming is what the registry and the discovery are each built on: the
// SDK's naming client, and one SDK subscription per Nacos service, shared
// by the service's listeners (of type L), who are told what value makes of
// its instances (a V: the registry's provider URLs, the discovery's
// instances).
type naming[L comparable, V any] struct {
	client naming_client.INamingClient
	group  string // the Nacos group of the services
	where  string // the server, for messages
	log    *slog.Logger
	// kind is what a service stands for, in messages ("service",
	// "application").
	kind      string
	errClosed error
	value     func(name string, ins []model.Instance) V
	notify    func(name string, l L, v V)

	// mu guards closed, subs and the owner's registrations.
	mu     sync.Mutex
	closed bool
	subs   map[string]*subscription[L, V]
}

// subscription is one SDK subscription to a service, shared by its
// listeners.
type subscription[L comparable, V any] struct {
	param     *vo.SubscribeParam
	listeners extension.Listeners[L, V]
	tell      func(L, V) // naming.notify for this service
}

// subscribe calls l with the value of name's instances now and after every
// push, through the service's one SDK subscription (made with its first
// listener).
func (n *naming[L, V]) subscribe(name string, l L) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return n.errClosed
	}
	if s := n.subs[name]; s != nil {
		n.mu.Unlock()
		s.listeners.Add(l, s.tell)
		return nil
	}
	s := &subscription[L, V]{tell: func(l L, v V) { n.notify(name, l, v) }}
	s.listeners.Add(l, s.tell)
	s.param = &vo.SubscribeParam{
		ServiceName: name,
		GroupName:   n.group,
		SubscribeCallback: func(ins []model.Instance, err error) {
			if err != nil {
				n.log.Warn("push error", n.kind, name, "err", err)
				return
			}
			s.listeners.Deliver(n.value(name, ins), nil, s.tell)
		},
	}
	if err := n.client.Subscribe(s.param); err != nil {
		n.mu.Unlock()
		_ = n.client.Unsubscribe(s.param)
		return fmt.Errorf("nacos: subscribe to the %s %s (group %s) at %s: %w", n.kind, name, n.group, n.where, err)
	}
	n.subs[name] = s
	n.mu.Unlock()

	// The SDK calls back on pushes only; deliver the current list now.
	ins, err := n.client.SelectAllInstances(vo.SelectAllInstancesParam{ServiceName: name, GroupName: n.group})
	if err != nil {
		n.log.Warn("initial instance list", n.kind, name, "err", err)
		return nil // the subscription stands; pushes will follow
	}
	// Unless a push came first: it is newer.
	s.listeners.Deliver(n.value(name, ins), func(_ V, had bool) bool { return !had }, s.tell)
	return nil
}

// unsubscribe stops l's notifications for name; the SDK subscription ends
// with the service's last listener.
func (n *naming[L, V]) unsubscribe(name string, l L) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.errClosed
	}
	s := n.subs[name]
	if s == nil || s.listeners.Remove(l) > 0 {
		return nil
	}
	delete(n.subs, name)
	if err := n.client.Unsubscribe(s.param); err != nil {
		return fmt.Errorf("nacos: unsubscribe from the %s %s: %w", n.kind, name, err)
	}
	return nil
}

// unsubscribeAll ends every subscription, for Close; called with mu held.
func (n *naming[L, V]) unsubscribeAll() []error {
	var errs []error
	for name, s := range n.subs {
		s.listeners.Clear()
		if err := n.client.Unsubscribe(s.param); err != nil {
			errs = append(errs, fmt.Errorf("unsubscribe from %s: %w", name, err))
		}
	}
	n.subs = nil
	return errs
}
