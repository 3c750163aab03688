// Package accesslog is Dubbo's AccessLogFilter. `accesslog=true` (or
// "default") logs each provider call through the App's logger; any other value
// is a file path to which lines are appended, in Dubbo's format:
//
//	[2006-01-02 15:04:05.000] 127.0.0.1:51234 -> group/org.example.Greeter:1.0 sayHello(Ljava/lang/String;) ["world"]
//
// File writes happen on a background goroutine per file, so a slow disk never
// holds a call; when its queue is full, lines are dropped and counted.
package accesslog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Name is the filter's extension name.
const Name = "accesslog"

const queueSize = 4096

// Activation: providers whose URL sets `accesslog`.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Keys: []string{kernel.KeyAccessLog}}
}

// Filter is the access log filter. Close flushes and closes its files.
type Filter struct {
	log     *slog.Logger
	mu      sync.Mutex
	files   map[string]*fileSink
	closed  bool
	dropped atomic.Int64
}

// New returns the filter; log receives the lines of `accesslog=true`.
func New(log *slog.Logger) *Filter { return &Filter{log: log, files: map[string]*fileSink{}} }

var _ extension.Filter = (*Filter)(nil)

// Dropped is the number of lines lost to full queues.
func (f *Filter) Dropped() int64 { return f.dropped.Load() }

// Invoke logs the call, then makes it.
func (f *Filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	dest := u.MethodParam(inv.Method, kernel.KeyAccessLog)
	if !kernel.IsTruthy(dest) {
		return next.Invoke(ctx, inv)
	}
	line := Line(time.Now(), u, inv)
	if dest == "true" || dest == "default" || dest == "1" { // config writes true as "1"
		f.log.Info(line, "logger", "weft.accesslog."+u.Interface())
	} else if err := f.write(dest, line); err != nil {
		f.log.Error("weft: access log", "file", dest, "err", err)
	}
	return next.Invoke(ctx, inv)
}

// Line is the access log line of a call: Dubbo's format, the arguments as
// bounded JSON (view.JSON), so that a hostile argument cannot make it
// unbounded or crash the walk.
func Line(now time.Time, u *kernel.URL, inv *kernel.Invocation) string {
	var b strings.Builder
	b.WriteByte('[')
	b.WriteString(now.Format("2006-01-02 15:04:05.000"))
	b.WriteString("] ")
	if inv.RemoteAddr != "" {
		b.WriteString(inv.RemoteAddr)
	} else {
		b.WriteString("injvm")
	}
	b.WriteString(" -> ")
	b.WriteString(u.ServiceKey())
	b.WriteByte(' ')
	b.WriteString(inv.Method)
	b.WriteByte('(')
	b.WriteString(inv.ParamTypes)
	b.WriteString(") ")
	// The arguments crossed the wire: they may be cyclic, shared a million
	// times over or deep. view.JSON bounds the line and always encodes.
	args, err := json.Marshal(view.JSON(inv.Args))
	if err != nil {
		args = []byte(`"(arguments not printable)"`)
	}
	b.Write(args)
	return b.String()
}

func (f *Filter) write(path, line string) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errors.New("filter closed")
	}
	s := f.files[path]
	if s == nil {
		fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			f.mu.Unlock()
			return err
		}
		s = &fileSink{f: fh, lines: make(chan string, queueSize), done: make(chan struct{})}
		go s.run()
		f.files[path] = s
	}
	f.mu.Unlock()
	select {
	case s.lines <- line:
	default:
		f.dropped.Add(1)
	}
	return nil
}

// Close flushes every file and stops the writers.
func (f *Filter) Close() error {
	f.mu.Lock()
	f.closed = true
	sinks := f.files
	f.files = map[string]*fileSink{}
	f.mu.Unlock()
	var errs []error
	for _, s := range sinks {
		close(s.lines)
		<-s.done
		errs = append(errs, s.err)
	}
	return errors.Join(errs...)
}

type fileSink struct {
	f     *os.File
	lines chan string
	done  chan struct{}
	err   error
}

func (s *fileSink) run() {
	defer close(s.done)
	w := bufio.NewWriter(s.f)
	for line := range s.lines {
		w.WriteString(line)
		w.WriteByte('\n')
		// Flush once the queue is drained: many lines per write under load,
		// no line left in memory when idle.
		if len(s.lines) == 0 {
			if err := w.Flush(); err != nil && s.err == nil {
				s.err = err
			}
		}
	}
	if err := w.Flush(); err != nil && s.err == nil {
		s.err = err
	}
	if err := s.f.Close(); err != nil && s.err == nil {
		s.err = err
	}
}
