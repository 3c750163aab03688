package wasmfilter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Where a module comes from: a file (Config.Path, watched), bytes
// (Config.Module), or a URL fetched once at start-up (Settings' url:);
// and the digest that pins it (sha256:), as Envoy's remote code source
// and Istio's WasmPlugin have it.

// MaxModuleBytes bounds a module fetched from a URL: a server (or whoever
// sits between) cannot make the App read without end. Real filters are
// well under it (a Go proxy-wasm filter is about 3 MB).
const MaxModuleBytes = 128 << 20

// fetchTimeout bounds the whole fetch of a module, connecting included.
const fetchTimeout = 30 * time.Second

// fetchModule reads the module at url (http or https), at most
// MaxModuleBytes, within fetchTimeout.
func fetchModule(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the module: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the module: the server answered %s; check the URL", resp.Status)
	}
	if resp.ContentLength > MaxModuleBytes {
		return nil, fmt.Errorf("fetching the module: it is %d bytes, over the %d weft reads", resp.ContentLength, MaxModuleBytes)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the module: %w", err)
	}
	if len(b) > MaxModuleBytes {
		return nil, fmt.Errorf("fetching the module: it is over the %d bytes weft reads", MaxModuleBytes)
	}
	return b, nil
}

// parseDigest decodes a hex SHA-256 (as sha256sum prints it).
func parseDigest(s string) ([]byte, error) {
	d, err := hex.DecodeString(s)
	if err != nil || len(d) != sha256.Size {
		return nil, fmt.Errorf("%q is not a SHA-256: want 64 hex digits, as `sha256sum module.wasm` prints", s)
	}
	return d, nil
}

// checkDigest refuses a module whose bytes are not the pinned ones.
func (f *Filter) checkDigest(data []byte) error {
	if f.digest == nil {
		return nil
	}
	if got := sha256.Sum256(data); !bytes.Equal(got[:], f.digest) {
		return fmt.Errorf("module %s has sha256 %x, but the filter's sha256 pins %x: it is not the module the config names; deploy that module or update sha256", f.path, got, f.digest)
	}
	return nil
}
