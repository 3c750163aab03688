package triple

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weftrpc/weft/kernel"
	netty "github.com/weftrpc/weft/transport-netty"
)

// The standard health service (grpc.health.v1.Health, grpc/grpc's
// doc/health-checking.md), answered by every Triple server unless the
// application exports one of its own: probes (Kubernetes' grpc probe,
// grpc_health_probe, load balancers) ask it whether the server, or one
// service, serves.
const (
	healthService = "grpc.health.v1.Health"

	healthServing    = 1
	healthNotServing = 2
)

// health answers Check: SERVING for the server ("") and for each exported
// service, NOT_SERVING once the server is stopping, NOT_FOUND (the gRPC
// status) for a service not exported here. Watch, a stream, is not served.
func (h *handler) health(ctx context.Context, st *stream, c *call, msg []byte) *netty.Response {
	if c.method != "Check" {
		return trailersOnly(st.id, statusUnimplemented, kernel.CodeMethodNotFound,
			fmt.Sprintf("%s/%s is not served here (Check is)", healthService, cut(c.method)))
	}
	svc, err := healthRequest(msg)
	if err != nil {
		return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "HealthCheckRequest: "+err.Error())
	}
	status := healthServing
	switch {
	case st.sc.stopping.Load() || len(*h.s.exporters.Load()) == 0:
		status = healthNotServing
	case svc != "" && !h.s.exports(svc):
		return trailersOnly(st.id, statusNotFound, kernel.CodeServiceNotFound, fmt.Sprintf("service %q is not exported here", cut(svc)))
	}
	// HealthCheckResponse{status = 1}: a varint field.
	out := []byte{0, 0, 0, 0, 2, byte(protowire.EncodeTag(1, protowire.VarintType)), byte(status)}
	return h.answer(ctx, st, c, out, nil, nil)
}

// healthRequest reads HealthCheckRequest{string service = 1}.
func healthRequest(b []byte) (string, error) {
	var svc string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return "", protowire.ParseError(m)
			}
			svc, b = v, b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", protowire.ParseError(m)
		}
		b = b[m:]
	}
	return svc, nil
}

// exports reports whether any exported service has interface iface (any
// group and version).
func (s *server) exports(iface string) bool {
	for _, e := range *s.exporters.Load() {
		if e.invoker.URL().Interface() == iface {
			return true
		}
	}
	return false
}
