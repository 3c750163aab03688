package wasmfilter

import (
	"context"
	"time"
)

// DefaultWatchInterval is how often an App's filters stat their module file.
const DefaultWatchInterval = 500 * time.Millisecond

// Watch starts polling the module file every interval and reloads it when it
// changes (see the package doc for why polling). It does nothing for a filter
// made from bytes, or if it is already watching. Close stops it.
func (f *Filter) Watch(interval time.Duration) {
	f = f.host // the VM's module, shared by its filters
	if f.inMem {
		return
	}
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	if f.stop != nil {
		return
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.watch(interval, f.stop, f.done)
}

func (f *Filter) stopWatching() {
	f.watchMu.Lock()
	stop, done := f.stop, f.done
	f.stop, f.done = nil, nil
	f.watchMu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (f *Filter) watch(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		f.poll()
	}
}

// poll reloads the file if it is not the one last tried. A file that is
// missing for a moment (between a delete and a create) is not an error: the
// current module keeps serving and the next poll looks again.
func (f *Filter) poll() {
	st, err := stat(f.path)
	if err != nil {
		return
	}
	f.mu.Lock()
	same := st.same(f.tried)
	f.mu.Unlock()
	if same {
		return
	}
	st, data, err := readStamped(f.path)
	if err != nil {
		return
	}
	if err := f.reload(context.Background(), st, data); err != nil {
		f.log.Error("weft: wasm filter module changed but cannot be loaded; the previous version keeps serving",
			"path", f.path, "error", err)
		return
	}
	f.log.Info("weft: wasm filter module reloaded", "path", f.path, "module_version", f.Stats().Version)
}
