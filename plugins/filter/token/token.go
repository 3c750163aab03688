// Package token is Dubbo's TokenFilter: a provider exported with `token`
// publishes the token in its URL (so in the registry), consumers that found
// the provider there send it back as the `token` attachment, and a call
// without it, or with another, is refused as forbidden. It keeps consumers
// from calling a provider directly, bypassing the registry (and whatever
// the registry's owner controls: routing rules, who may see the provider).
// It is not authentication: anyone who can read the registry can read the
// token; use TLS and a real credential for that.
//
// `token: true` (or "default") makes a random token per export, as Dubbo
// does; any other value is the token itself. Calls made in process (injvm)
// carry no credentials and need none.
package token

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"fmt"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the filter's extension name.
const Name = "token"

// Activation: providers whose URL sets `token`. It runs right after the
// context filter, before anything that counts or logs calls, so that a
// refused call costs nothing else.
func Activation() *kernel.Activate {
	return &kernel.Activate{Groups: []string{kernel.GroupProvider}, Keys: []string{kernel.KeyToken}, Order: -9000}
}

// New returns the filter.
func New() extension.Filter { return filter{} }

type filter struct{}

func (filter) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	u := next.URL()
	want := u.Param(kernel.KeyToken)
	if !kernel.IsTruthy(want) || inv.RemoteAddr == "" {
		return next.Invoke(ctx, inv)
	}
	got, _ := inv.Attachment(kernel.KeyToken)
	s, _ := got.(string)
	if subtle.ConstantTimeCompare([]byte(s), []byte(want)) != 1 {
		why := "without the token"
		if s != "" {
			why = "with a wrong token"
		}
		return kernel.Result{}, kernel.Errorf(kernel.CodeForbidden,
			"invalid token: %s.%s called from %s %s; the provider takes calls from consumers that found it through its registry (which publishes the token) or that set its token on their url",
			u.ServiceKey(), inv.Method, inv.RemoteAddr, why)
	}
	return next.Invoke(ctx, inv)
}

// Resolve turns a configured token into the one to publish: "true",
// "default" (and "1", as config writes true) make a random token, as Dubbo
// does per export; "", "false" and "0" mean none; any other value is the
// token itself.
func Resolve(configured string) (string, error) {
	switch configured {
	case "", "false", "0":
		return "", nil
	case "true", "default", "1":
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("token: %w", err)
		}
		b[6] = b[6]&0x0f | 0x40 // a version 4 UUID, Dubbo's form
		b[8] = b[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
	}
	return configured, nil
}
