// Package greeter is the quick start's service: its implementation and the
// consumer stub that calls it.
package greeter

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftrpc/weft/kernel"
)

// Interface is the service's Java-style interface name.
const Interface = "org.weft.quickstart.Greeter"

// Greeter implements the service.
type Greeter struct{}

// SayHello greets name, with the caller's `lang` attachment if it sent one.
func (Greeter) SayHello(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", errors.New("name must not be empty")
	}
	greeting := "Hello"
	if inv, ok := kernel.InvocationFrom(ctx); ok && inv.AttachmentString("lang") == "fr" {
		greeting = "Bonjour"
	}
	return fmt.Sprintf("%s, %s!", greeting, name), nil
}

// Client is the consumer stub: its fields are filled by the App.
type Client struct {
	SayHello func(ctx context.Context, name string) (string, error)
	Echo     func(ctx context.Context, v string) (string, error) `weft:"$echo"`
}
