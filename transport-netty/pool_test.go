package netty

import (
	"sync"
	"testing"
	"time"
)

// Workers serve tasks one after another and retire once idle for the pool's
// idle time, however many tasks they served before; busy ones are not
// retired.
func TestWorkerPoolRetiresIdleWorkers(t *testing.T) {
	var mu sync.Mutex
	served := 0
	release := make(chan struct{})
	p := newWorkerPool(4, 0, 50*time.Millisecond, func(tk task) {
		if tk.req.Data == "block" {
			<-release
		}
		mu.Lock()
		served++
		mu.Unlock()
	})
	defer p.close()
	req := &Request{}
	for range 100 {
		for !p.submit(task{req: req}) {
			time.Sleep(time.Millisecond)
		}
	}
	// Workers just done may not be back for a task yet: a full pool
	// refuses until one is.
	for deadline := time.Now().Add(2 * time.Second); !p.submit(task{req: &Request{Data: "block"}}); {
		if time.Now().After(deadline) {
			t.Fatal("the pool refused a task for 2 s with nothing running")
		}
		time.Sleep(time.Millisecond)
	}
	// Keep one worker busy past the idle time: it must not retire.
	time.Sleep(150 * time.Millisecond)
	if n := p.workers.Load(); n != 1 {
		t.Fatalf("%d workers after 150 ms with one busy, want 1 (the idle ones retired)", n)
	}
	close(release)
	deadline := time.Now().Add(2 * time.Second)
	for p.workers.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.workers.Load(); n != 0 {
		t.Fatalf("%d workers left after all went idle", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if served != 101 {
		t.Fatalf("served %d tasks, want 101", served)
	}
}
