package proxy

import (
	"context"

	"github.com/weftrpc/weft/kernel"
)

// GenericClient calls any method of a referred service without a stub.
type GenericClient struct {
	invoker func() (kernel.Invoker, error)
}

// NewGenericClient calls through the invoker invoker returns at each call.
func NewGenericClient(invoker func() (kernel.Invoker, error)) *GenericClient {
	return &GenericClient{invoker: invoker}
}

// Invoke calls method (its wire name, "sayHello") with args as they are.
func (g *GenericClient) Invoke(ctx context.Context, method string, args ...any) (any, error) {
	iv, err := g.invoker()
	if err != nil {
		return nil, err
	}
	res, err := iv.Invoke(ctx, kernel.NewInvocation(method, args...))
	return res.Value, err
}

// GenericInvoke makes Dubbo's generic call `$invoke(method, types, args)`:
// types are Java type names ("java.lang.String", "long"), POJO arguments are
// maps of their fields, and a POJO result comes back as a map with a "class"
// entry. The provider needs its generic filter (weft's and Dubbo's have it).
func (g *GenericClient) GenericInvoke(ctx context.Context, method string, types []string, args []any) (any, error) {
	iv, err := g.invoker()
	if err != nil {
		return nil, err
	}
	res, err := iv.Invoke(ctx, GenericInvocation(method, types, args))
	return res.Value, err
}

// GenericInvocation is the invocation of Dubbo's generic call
// `$invoke(method, types, args)`, for callers that set attachments of their
// own or read the result's.
func GenericInvocation(method string, types []string, args []any) *kernel.Invocation {
	if types == nil {
		types = []string{}
	}
	if args == nil {
		args = []any{}
	}
	inv := kernel.NewInvocation("$invoke", method, types, args)
	inv.ParamTypes = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;"
	inv.SetAttachment("generic", "true")
	return inv
}
