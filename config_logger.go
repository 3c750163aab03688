package weft

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// LoggerConfig is the App's logger when weft.WithLogger gives none, with
// dubbo-go's key names (`logger.level`, `logger.format`, `logger.appender`,
// `logger.file.name`). The default is what an operator reads at a terminal:
// text lines at info level on stderr.
type LoggerConfig struct {
	// Level is debug, info (the default), warn or error.
	Level string `koanf:"level"`
	// Format is text (the default, slog's key=value lines) or json (one
	// object a line, for log collectors).
	Format string `koanf:"format"`
	// Appender is console (the default: stderr) or file (File.Name).
	Appender string           `koanf:"appender"`
	File     LoggerFileConfig `koanf:"file"`
}

// LoggerFileConfig is where a file appender writes. The file is appended
// to and never rotated by weft: the host's log rotation owns old files
// (copytruncate, since weft keeps the file open).
type LoggerFileConfig struct {
	Name string `koanf:"name"`
}

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// newLogger builds the logger lc describes; the closer, when not nil,
// closes its file. Errors name the key, the known values and the fix.
func newLogger(lc LoggerConfig) (*slog.Logger, io.Closer, error) {
	level := slog.LevelInfo
	if lc.Level != "" {
		l, ok := logLevels[strings.ToLower(lc.Level)]
		if !ok {
			return nil, nil, fmt.Errorf("weft: config: logger.level: %q is not a level (known: debug, info, warn, error); set one of them or remove the key", lc.Level)
		}
		level = l
	}
	var out io.Writer = os.Stderr
	var closer io.Closer
	switch strings.ToLower(lc.Appender) {
	case "", "console":
	case "file":
		if lc.File.Name == "" {
			return nil, nil, fmt.Errorf("weft: config: logger.file.name: the file appender needs a file; set logger.file.name or use appender: console")
		}
		f, err := os.OpenFile(lc.File.Name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("weft: config: logger.file.name: %w", err)
		}
		out, closer = f, f
	default:
		return nil, nil, fmt.Errorf("weft: config: logger.appender: %q is not an appender (known: console, file); set one of them or remove the key", lc.Appender)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(lc.Format) {
	case "", "text":
		h = slog.NewTextHandler(out, opts)
	case "json":
		h = slog.NewJSONHandler(out, opts)
	default:
		if closer != nil {
			closer.Close()
		}
		return nil, nil, fmt.Errorf("weft: config: logger.format: %q is not a format (known: text, json); set one of them or remove the key", lc.Format)
	}
	return slog.New(h), closer, nil
}
