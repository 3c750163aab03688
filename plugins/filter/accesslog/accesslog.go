// Package accesslog is Dubbo's AccessLogFilter. `accesslog=true` (or
// "default") logs each provider call through the App's logger; any other value
// is a file path to which lines are appended, in Dubbo's format:
//
//	[2006-01-02 15:04:05.000] 127.0.0.1:51234 -> group/org.example.Greeter:1.0 sayHello(Ljava/lang/String;) ["world"]
//
// File writes happen on a background goroutine per file, so a slow disk never
// holds a call; when its queue is full, lines are dropped and counted. A file
// rotates as Dubbo's does when the day changes (the old one is renamed
// path.YYYYMMDD), and also when it reaches MaxFileSize (renamed
// path.YYYYMMDD-HHMMSS), so one file never grows without bound; removing old
// files is left to the host's log rotation. Arguments are written as their
// bounded JSON view (kernel/view), so one line is at most some 64 KiB.
package accesslog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strconv"
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

// MaxFileSize is the size at which a log file rotates.
const MaxFileSize = 256 << 20

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
	// maxSize and now are MaxFileSize and time.Now, replaced by tests.
	maxSize int64
	now     func() time.Time
}

// New returns the filter; log receives the lines of `accesslog=true`.
func New(log *slog.Logger) *Filter {
	return &Filter{log: log, files: map[string]*fileSink{}, maxSize: MaxFileSize, now: time.Now}
}

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
	line := Line(f.now(), u, inv)
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
		s = &fileSink{f: fh, path: path, lines: make(chan string, queueSize), done: make(chan struct{}),
			maxSize: f.maxSize, now: f.now, log: f.log}
		if st, err := fh.Stat(); err == nil {
			s.size, s.day = st.Size(), day(st.ModTime())
		} else {
			s.day = day(f.now())
		}
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
	f       *os.File
	path    string
	lines   chan string
	done    chan struct{}
	err     error
	size    int64
	day     string // of the lines in f, YYYYMMDD
	maxSize int64
	now     func() time.Time
	log     *slog.Logger
}

func day(t time.Time) string { return t.Format("20060102") }

func (s *fileSink) run() {
	defer close(s.done)
	w := bufio.NewWriter(s.f)
	for line := range s.lines {
		if today := day(s.now()); today != s.day || s.size+int64(len(line))+1 > s.maxSize && s.size > 0 {
			suffix := s.day
			if today == s.day {
				suffix = s.now().Format("20060102-150405")
			}
			w = s.rotate(w, suffix)
			s.day = today
		}
		w.WriteString(line)
		w.WriteByte('\n')
		s.size += int64(len(line)) + 1
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

// rotate renames the file to path.suffix and opens a new one; on failure
// it keeps writing to the old file and logs why.
func (s *fileSink) rotate(w *bufio.Writer, suffix string) *bufio.Writer {
	w.Flush()
	old := s.path + "." + suffix
	for i := 1; ; i++ {
		if _, err := os.Stat(old); os.IsNotExist(err) {
			break
		}
		old = s.path + "." + suffix + "." + strconv.Itoa(i)
	}
	if err := os.Rename(s.path, old); err != nil {
		s.log.Error("weft: access log: cannot rotate", "file", s.path, "err", err)
		return w
	}
	fh, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.log.Error("weft: access log: cannot reopen after rotating", "file", s.path, "err", err)
		return w
	}
	s.f.Close()
	s.f, s.size = fh, 0
	return bufio.NewWriter(fh)
}
